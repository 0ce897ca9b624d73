/**
 * `npm run bench`: measures the real service (built dist/server.js, shipped default config) on SQLite,
 * PostgreSQL (embedded, as in the tests) and memory against a bare-Fastify baseline, in one run. Next
 * to req/s and latency it reports what drift moves least: each server's CPU time per request (from
 * /proc; for PostgreSQL also the database's), and the load generator's CPU share, marking a measurement
 * whose generator was 90 % busy or more as invalid: then it measured itself, not the server.
 *
 *   npm run bench                      full run: 5 interleaved rounds of 4 s per measurement, every part
 *   npm run bench -- --quick           smoke run: 1 round of 1 s
 *   npm run bench -- --only tokens     only the named parts of the full run (comma-separated; with or
 *                                      without --quick):
 *                                        backends  baseline, SQLite, PostgreSQL and memory, ratios ÷ baseline
 *                                        tokens    one SQLite service accepting an environment token
 *                                                  (PLANTSTORE_TOKENS) and a store token (made through
 *                                                  POST /admin/tokens), POST and GET by id with each:
 *                                                  ratios store token ÷ environment token
 *                                        jwt       one SQLite service accepting a service token
 *                                                  (PLANTSTORE_TOKENS) and JWTs from an identity provider
 *                                                  the bench serves (discovery, key set): POST and GET by
 *                                                  id with each, ratios JWT ÷ service token; then, in the
 *                                                  bench's process, the CPU of a JWT's first verification
 *                                                  per algorithm (RS256, PS256, ES256, EdDSA) against the
 *                                                  same token found remembered
 *                                        auth-failure-limit  two SQLite services, AUTH_FAILURE_LIMIT_PER_MINUTE
 *                                                  0 (off) and the default (100): GET by id with a
 *                                                  valid token, ratios default ÷ off
 *                                        updates   one SQLite service: PUT and PATCH of stored plants
 *                                                  ÷ POST of new ones, and a page of one tag ÷ a page
 *                                                  of all plants (both 100 plants)
 *                                        webhooks  SQLite services without a webhook subscription, with
 *                                                  one that records events only (WEBHOOK_DELIVERY=false),
 *                                                  and with one that delivers them to a local receiver:
 *                                                  POST ÷ POST without, deliveries per second, the
 *                                                  backlog when the load stops and the time to drain it
 *                                        observability  SQLite services with metrics off (METRICS_PORT=0),
 *                                                  with metrics on (the default) and with tracing on too
 *                                                  (100 % sampled, exported over OTLP/HTTP to a local sink
 *                                                  that counts and discards spans), POST and GET by id,
 *                                                  new processes every round: ratios ÷ metrics off
 *   npm run bench -- --only data       export and import rates and peak RSS at 1M and 10M plants on SQLite
 *                                      and PostgreSQL, against the service's POST rate, and a backup of a
 *                                      1M-plant SQLite store under 32 writers (not part of a full run;
 *                                      figures in bench/results/data.json)
 *   npm run bench -- --only pooling    PostgreSQL directly, through PgBouncer in session mode and through
 *                                      PgBouncer in transaction mode (DATABASE_POOLING=transaction): POST and
 *                                      GET by id, ratios ÷ direct, PgBouncer's own CPU per request (not part
 *                                      of a full run: needs /usr/sbin/pgbouncer; figures in
 *                                      bench/results/pooling.json)
 *   npm run bench -- --only profiles   the baseline and the service on SQLite, PostgreSQL and memory under
 *                                      `node --cpu-prof`, one measurement of each load: µs per request by
 *                                      place and by function, service against baseline (not part of a full
 *                                      run; figures in bench/results/profiles.json)
 *   npm run bench -- --only batch      POST /plants/batch: batches of 1, 10, 100 and 1000 creates against single
 *                                      POSTs, 50 connections, SQLite and PostgreSQL: plants/s, CPU per plant,
 *                                      ratios; a lone batch of 1000 on SQLite, its p99 (not part of a full
 *                                      run; figures in bench/results/batch.json)
 *   npm run bench -- --only query      finding plants at 1M (100,000 with --quick; BENCH_QUERY_PLANTS=N): SQLite
 *                                      and PostgreSQL stores of bench/plant-catalog.ts's plants, 50 connections
 *                                      each reading another page: an id page at a random `after` ÷ the
 *                                      baseline's (holding the same plants), a sort=name page at a random
 *                                      cursor, a search of 3-8 characters and counted pages of a tag and of
 *                                      a search ÷ the same engine's id page; walks of 10k and of every plant
 *                                      by name and their peak RSS; profiles of every load; the upgrade of a
 *                                      1.7.0 store as large (not part of a full run; BENCH_QUERY_PHASES=loads,
 *                                      walks,profiles,upgrades for some only, BENCH_QUERY_LOADS=name,q for
 *                                      some loads and the id page; with --baseline-dist, the
 *                                      release's service on stores of its own too; figures in
 *                                      bench/results/query.json)
 *   npm run bench -- --only changes --baseline-dist ../plantstore-1.7.0
 *                                      the change log (issue 37): POST against the 1.7.0 build named (and
 *                                      the builds of BENCH_CHANGES_ALSO=<root>,…) and with a webhook
 *                                      subscription, SQLite and PostgreSQL; 1000 open streams on SQLite
 *                                      while 500 writes/s go in (latency, RSS per stream, CPU per event);
 *                                      a feed page of 100 against a list page of 100 over 200,000 changes;
 *                                      a write's p99 while a million expired changes are pruned; CPU
 *                                      profiles (not part of a full run; BENCH_CHANGES_PHASES=writes,
 *                                      streams,feed,prune,profiles for some; figures in
 *                                      bench/results/changes.json)
 *   npm run bench -- --only observability --baseline-dist ../plantstore-1.3.0
 *                                      also a `release` service: the dist/server.js of another build
 *                                      (built, its own node_modules installed), in the same rounds
 *   npm run bench -- --scale 1000000,10000000
 *                                      cost as the store grows: bulk-load N plants, then measure POST,
 *                                      GET by id, a deep list page and a deep page of one tag (held by
 *                                      about 10,000 of the N plants) against the empty store
 *   npm run bench -- --help            this text
 *
 * Servers run on CPU 0 and the load generator (wrk, installed from Debian's packages when missing and
 * run as root; else autocannon in this process) on CPU 1 when `taskset` exists. Services run with the
 * shipped Node.js flags only; the baseline's young generation cannot shrink below the shipped size
 * (`benchNodeFlags`: servers idle between measurements).
 * Figures are medians over rounds; ratios are against the reference of the same run, named in each
 * row's `against` (the backends' rows have a second, `baseline-logged`: the baseline with Fastify's
 * default request logging). Every part's tables are followed by the run's regime: the bare baseline's
 * CPU per POST and GET, from the backends part or from a probe at the start of the run, and whether that
 * makes a fast day (a baseline POST at 25 µs or less).
 *
 * Results go to bench/results/latest.json (quick.json with --quick) as `{ machine, rows }`. A run of
 * some parts only (--only) replaces those parts' rows in the file and keeps the others, with their
 * `machine`; its own machine and date go to `partialRuns.<part>`. The chart (latest.svg) shows the
 * backends' rows and is written only when they were measured.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve as resolvePath } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Row } from './figures.js'
import { Harness, regimeLine, type Part } from './harness.js'
import { authFailureLimitPart } from './parts/auth-failure-limit.js'
import { backendsPart } from './parts/backends.js'
import { batchPart } from './parts/batch.js'
import { changesPart } from './parts/changes.js'
import { dataPart } from './parts/data.js'
import { jwtPart } from './parts/jwt.js'
import { observabilityPart } from './parts/observability.js'
import { poolingPart } from './parts/pooling.js'
import { profilesPart } from './parts/profiles.js'
import { queryPart } from './parts/query.js'
import { compareSizes } from './parts/scale.js'
import { tokensPart } from './parts/tokens.js'
import { updatesPart } from './parts/updates.js'
import { webhooksPart } from './parts/webhooks.js'
import { writeResults } from './report.js'

/** Every part of a full run, in the order they run and their rows are written. */
const PARTS: readonly Part[] = [backendsPart, tokensPart, jwtPart, authFailureLimitPart, updatesPart, webhooksPart, observabilityPart]
/** Parts run only when named with --only: they take long, and their figures are not ratios of the full run's. */
const ON_REQUEST: readonly Part[] = [dataPart, poolingPart, profilesPart, batchPart, queryPart, changesPart]
const PART_NAMES = [...PARTS, ...ON_REQUEST].map((part) => part.name)

const args = process.argv.slice(2)
if (args.includes('--help') || args.includes('-h')) {
  const source = readFileSync(fileURLToPath(import.meta.url), 'utf8')
  process.stdout.write(`${/\/\*\*\n([\s\S]*?)\n \*\//.exec(source)?.[1]?.replace(/^ \* ?/gm, '') ?? ''}\n`)
  process.exit(0)
}
const quick = args.includes('--quick')
const scaleArgument = args[args.indexOf('--scale') + 1]
const scaleSizes = args.includes('--scale') && scaleArgument !== undefined ? scaleArgument.split(',').map(Number) : undefined
const onlyArgument = args.includes('--only') ? args[args.indexOf('--only') + 1] ?? '' : undefined
const chosenNames = onlyArgument === undefined ? PARTS.map((part) => part.name) : onlyArgument.split(',').map((part) => part.trim())
const unknownPart = chosenNames.find((name) => !PART_NAMES.includes(name))
if (unknownPart !== undefined || chosenNames.length === 0) {
  process.stderr.write(`--only takes a comma-separated list of ${PART_NAMES.join(', ')}; got ${JSON.stringify(onlyArgument)} (see --help)\n`)
  process.exit(2)
}
const chosen = [...PARTS, ...ON_REQUEST].filter((part) => chosenNames.includes(part.name))
const baselineDistArgument = args.includes('--baseline-dist') ? args[args.indexOf('--baseline-dist') + 1] ?? '' : undefined
/** The root of the build `--baseline-dist` names (its root or its dist folder), whose dist/server.js the release service runs. */
const releaseRoot = baselineDistArgument === undefined
  ? undefined
  : existsSync(join(baselineDistArgument, 'dist', 'server.js')) ? resolvePath(baselineDistArgument) : resolvePath(baselineDistArgument, '..')
if (releaseRoot !== undefined && !existsSync(join(releaseRoot, 'dist', 'server.js'))) {
  process.stderr.write(`--baseline-dist takes a build's root or dist folder, with dist/server.js built; got ${JSON.stringify(baselineDistArgument)}\n`)
  process.exit(2)
}

const harness = new Harness({ quick, releaseRoot })
try {
  // Measured first when no part measures it, so that it describes the same minutes as the tables.
  if (scaleSizes !== undefined || !chosen.includes(backendsPart)) process.stderr.write(regimeLine(await harness.regime()))
  if (scaleSizes !== undefined) {
    await compareSizes(harness, scaleSizes)
    process.stdout.write(`\n${regimeLine(await harness.regime())}`)
  } else {
    const rows: Row[] = []
    for (const part of chosen) {
      rows.push(...await part.compare(harness))
      process.stdout.write(`\n${regimeLine(await harness.regime())}`)
    }
    const measuredOfFullRun = chosen.filter((part) => PARTS.includes(part))
    if (measuredOfFullRun.length > 0) writeResults(harness, rows, measuredOfFullRun, PARTS)
  }
} finally {
  await harness.cleanUp()
}
