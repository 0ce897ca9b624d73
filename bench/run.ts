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
 * run as root; else autocannon in this process) on CPU 1 when `taskset` exists. Servers run with the
 * shipped Node.js flags and a young generation that cannot shrink below its shipped size (`benchNodeFlags`:
 * they idle between measurements).
 * Figures are medians over rounds; ratios are against the reference of the same run, named in each
 * row's `against`.
 *
 * Results go to bench/results/latest.json (quick.json with --quick) as `{ machine, rows }`. A run of
 * some parts only (--only) replaces those parts' rows in the file and keeps the others, with their
 * `machine`; its own machine and date go to `partialRuns.<part>`. The chart (latest.svg) shows the
 * backends' rows and is written only when they were measured.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve as resolvePath } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { openPostgresStore } from '../src/store/postgres/store.js'
import { openSqliteDatabase } from '../src/store/sqlite/connection.js'
import { freePort, startEmbeddedPostgres, type PostgresServer } from '../scripts/embedded-postgres.js'
import { renderChart } from './chart.js'
import { LISTED_TAG, loadGenerator, preloadedTagOf, processCpuSeconds, processTreeCpuSeconds, type Load } from './load-generator.js'

const TOKEN = 'bench-token'
/** The names of the token comparison's two plant tokens: equally long, so their log lines are too. */
const ENVIRONMENT_TOKEN_NAME = 'bench-token'
const STORE_TOKEN_NAME = 'bench-store'
const CONNECTIONS = 50
const PRELOADED = 2000
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const RESULTS = join(ROOT, 'bench', 'results')

const LOADS: readonly Load[] = ['post', 'get', 'list']
/** A generator this busy may be what limits the rate: its measurement is marked invalid. */
const SATURATED_GENERATOR = 0.9

interface Sample {
  rps: number
  p50: number
  p99: number
  rssMb: number
  errors: number
  /** The server process's CPU time (all threads) ÷ requests answered, in µs. */
  serverCpuUs: number
  /** PostgreSQL targets: the database server's CPU time ÷ requests, in µs. */
  databaseCpuUs: number
  generatorCpuShare: number
  /** Requests answered in the measurement. */
  requests: number
  /**
   * The server's minor page faults ÷ requests: a heap that keeps mapping fresh pages (a young
   * generation too small, see benchNodeFlags) shows here first.
   */
  pageFaultsPerRequest: number
}
interface Target {
  readonly name: string
  readonly url: string
  readonly process: ChildProcess
  /** The bearer token the load generator sends. */
  token: string
  nextId: bigint
  preloadedIds: bigint[]
  /** A service's metrics listener, when it has one. */
  readonly metricsUrl?: string
}

const PARTS = ['backends', 'tokens', 'updates', 'webhooks', 'observability'] as const
type Part = typeof PARTS[number]

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
const parts: readonly Part[] = onlyArgument === undefined ? PARTS : onlyArgument.split(',').map((part) => part.trim()) as Part[]
const unknownPart = parts.find((part) => !PARTS.includes(part))
if (unknownPart !== undefined || parts.length === 0) {
  process.stderr.write(`--only takes a comma-separated list of ${PARTS.join(', ')}; got ${JSON.stringify(onlyArgument)} (see --help)\n`)
  process.exit(2)
}
const baselineDistArgument = args.includes('--baseline-dist') ? args[args.indexOf('--baseline-dist') + 1] ?? '' : undefined
/** The root of the build `--baseline-dist` names (its root or its dist folder), whose dist/server.js the release service runs. */
const baselineRoot = baselineDistArgument === undefined
  ? undefined
  : existsSync(join(baselineDistArgument, 'dist', 'server.js')) ? resolvePath(baselineDistArgument) : resolvePath(baselineDistArgument, '..')
if (baselineRoot !== undefined && !existsSync(join(baselineRoot, 'dist', 'server.js'))) {
  process.stderr.write(`--baseline-dist takes a build's root or dist folder, with dist/server.js built; got ${JSON.stringify(baselineDistArgument)}\n`)
  process.exit(2)
}
const rounds = quick ? 1 : 5
const durationSeconds = quick ? 1 : 4

const pinning = existsSync('/usr/bin/taskset') && cpus().length >= 2
if (pinning) execFileSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' })
const serverCommand = (command: string[]) => pinning ? ['taskset', '-c', '0', ...command] : command
const generator = loadGenerator(pinning ? 1 : undefined)

const workFolder = mkdtempSync(join(tmpdir(), 'plantstore-bench-'))
const started: ChildProcess[] = []
let postgres: PostgresServer | undefined

async function cleanUp (): Promise<void> {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) process.kill(child.pid, 'SIGKILL')
  }
  await postgres?.destroy()
  rmSync(workFolder, { recursive: true, force: true })
}

/**
 * Starts a server with its standard output in a file, as a container runtime would take it off the
 * server's hands: the log lines cost the server their writes, but reading them does not cost the load
 * generator's core.
 */
function startProcess (name: string, command: string[], env: Record<string, string>, cpu: 0 | 1 = 0, cwd = ROOT): Promise<Target> {
  const [program, ...rest] = cpu === 0 ? serverCommand(command) : pinning ? ['taskset', '-c', '1', ...command] : command
  const logFile = join(workFolder, `${name}.log`)
  const logFd = openSync(logFile, 'w')
  const child = spawn(program as string, rest, {
    cwd,
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', PLANTSTORE_TOKENS: TOKEN, BENCH_TOKEN: TOKEN, ...env },
    stdio: ['ignore', logFd, 'inherit']
  })
  closeSync(logFd)
  started.push(child)
  return new Promise((resolve, reject) => {
    const startedAt = Date.now()
    const poll = setInterval(() => {
      const output = readFileSync(logFile, 'utf8')
      const url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1]
      if (url !== undefined) {
        clearInterval(poll)
        resolve({ name, url, process: child, token: TOKEN, nextId: 1_000_000_000_000n, preloadedIds: [] })
      } else if (child.exitCode !== null || Date.now() - startedAt > 30_000) {
        clearInterval(poll)
        reject(new Error(`${name} did not start (exit code ${child.exitCode}):\n${output.slice(-5000)}`))
      }
    }, 50)
  })
}

/** The Node.js flags `npm start` (and the image) of the build in `root` run the service with: the shipped memory settings. */
const serviceNodeFlags = (root: string) => (/node ((?:--\S+ )*)dist\/server\.js/.exec(
  (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start)?.[1] ?? '')
  .split(' ').filter((flag) => flag !== '')

/**
 * Added to every measured server's Node.js flags: the shipped largest semi-space (8 MB) as the least
 * too. The rounds leave each server idle while the others are measured, 10 to 30 s, which a loaded
 * service never is; V8 shrinks the young generation of an idle heap, and some servers never grew it
 * back: they scavenged every 8 ms instead of every 17, promoted what a larger young generation would
 * have let die, and ran Mark-Compacts and mapped heap pages all along (0.6 page faults a request
 * instead of 0.05): a third more CPU a request, for the whole run, in one service of a part or another
 * (docs/benchmarks.md, 2026-11-23 21:42 UTC). A loaded service keeps the shipped size; so do these.
 */
const benchNodeFlags = (shippedFlags: readonly string[]) => {
  const semiSpaceMb = shippedFlags.map((flag) => /^--max-semi-space-size=(\d+)$/.exec(flag)?.[1]).find((size) => size !== undefined) ?? '8'
  return [`--min-semi-space-size=${semiSpaceMb}`]
}

/**
 * Starts `dist/server.js` of the build in `root` (this one unless told), its working directory there so
 * that build's node_modules are used. Every service gets a free METRICS_PORT of its own (metrics on,
 * the shipped default) unless `env` sets one: the default 9464 would let only one service start.
 */
async function startService (name: string, databaseUrl: string, env: Record<string, string> = {}, root = ROOT): Promise<Target> {
  const metricsPort = env.METRICS_PORT ?? String(await freePort())
  const target = await startProcess(name, [process.execPath, ...serviceNodeFlags(root), ...benchNodeFlags(serviceNodeFlags(root)), 'dist/server.js'],
    { DATABASE_URL: databaseUrl, METRICS_PORT: metricsPort, ...env }, 0, root)
  return metricsPort === '0' ? target : { ...target, metricsUrl: `http://127.0.0.1:${metricsPort}` }
}

function rssMb (pid: number | undefined): number {
  if (pid === undefined) return 0
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match === null ? 0 : Number(match[1]) / 1024
}

/** The server's own PID: under taskset the child is taskset, which execs the server in place. */
const serverPid = (target: Target) => target.process.pid

async function measure (target: Target, load: Load, seconds: number, deepAfter?: bigint): Promise<Sample> {
  const pid = serverPid(target) as number
  let peakRss = 0
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMb(pid)) }, 250)
  const serverCpuBefore = processCpuSeconds(pid)
  const pageFaultsBefore = minorPageFaults(pid)
  const databaseCpuBefore = target.name.startsWith('postgres') ? postgresCpuSeconds() : 0
  const firstNewId = target.nextId
  target.nextId += 100_000_000n
  const result = await generator.run({
    url: target.url,
    token: target.token,
    load,
    connections: CONNECTIONS,
    seconds,
    firstNewId,
    preloaded: Number(target.preloadedIds.reduce((highest, id) => id > highest ? id : highest, 1n)),
    ...(deepAfter === undefined ? {} : { after: deepAfter })
  })
  const serverCpu = processCpuSeconds(pid) - serverCpuBefore
  const pageFaults = minorPageFaults(pid) - pageFaultsBefore
  const databaseCpu = target.name.startsWith('postgres') ? postgresCpuSeconds() - databaseCpuBefore : 0
  clearInterval(sampler)
  peakRss = Math.max(peakRss, rssMb(pid))
  return {
    rps: result.requests / result.seconds,
    p50: result.p50Ms,
    p99: result.p99Ms,
    rssMb: Math.round(peakRss),
    errors: result.errors,
    serverCpuUs: serverCpu / result.requests * 1e6,
    databaseCpuUs: databaseCpu / result.requests * 1e6,
    generatorCpuShare: result.generatorCpuShare,
    requests: result.requests,
    pageFaultsPerRequest: pageFaults / result.requests
  }
}

/** A process's minor page faults so far, from /proc (field 10 of its stat). */
function minorPageFaults (pid: number): number {
  return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[7])
}

function postgresCpuSeconds (): number {
  const pid = postgres?.pid()
  return pid === undefined ? 0 : processTreeCpuSeconds(pid)
}

/** Creates plants 1 to `count`, each with its `preloadedTagOf` tag. */
async function preload (target: Target, count: number): Promise<void> {
  const ids = Array.from({ length: count }, (_, index) => BigInt(index + 1))
  for (let start = 0; start < ids.length; start += CONNECTIONS) {
    await Promise.all(ids.slice(start, start + CONNECTIONS).map(async (id) => {
      const response = await fetch(`${target.url}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
        body: `{"id":${id},"name":"plant ${id}","tag":"${preloadedTagOf(id)}"}`
      })
      if (response.status !== 200) throw new Error(`${target.name}: preload answered ${response.status}`)
    }))
  }
  target.preloadedIds = ids
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] as number : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2
}

/** Medians of a target's samples; `cpuDecimals` for the server's µs per request (whole µs unless asked). */
function summarize (samples: Sample[], cpuDecimals = 0) {
  const generatorCpuShare = Math.max(...samples.map((sample) => sample.generatorCpuShare))
  return {
    rps: Math.round(median(samples.map((sample) => sample.rps))),
    p50: median(samples.map((sample) => sample.p50)),
    p99: median(samples.map((sample) => sample.p99)),
    rssMb: Math.max(...samples.map((sample) => sample.rssMb)),
    errors: samples.reduce((sum, sample) => sum + sample.errors, 0),
    serverCpuUs: Number(median(samples.map((sample) => sample.serverCpuUs)).toFixed(cpuDecimals)),
    databaseCpuUs: Math.round(median(samples.map((sample) => sample.databaseCpuUs))),
    generatorCpuShare: Number(generatorCpuShare.toFixed(2)),
    valid: generatorCpuShare < SATURATED_GENERATOR
  }
}

function machine () {
  return {
    node: process.version,
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
    pinned: pinning ? 'servers on CPU 0, load generator on CPU 1' : 'not pinned (no taskset)',
    date: new Date().toISOString(),
    loadGenerator: generator.name,
    serverNodeFlags: [...serviceNodeFlags(ROOT), ...benchNodeFlags(serviceNodeFlags(ROOT))].join(' '),
    connections: CONNECTIONS,
    rounds,
    durationSeconds
  }
}

async function startPostgresDatabase (): Promise<string> {
  postgres ??= await startEmbeddedPostgres()
  const pid = postgres.pid()
  if (pinning && pid !== undefined) execFileSync('taskset', ['-a', '-p', '-c', '0', String(pid)], { stdio: 'ignore' })
  const name = `bench_${Date.now()}`
  const admin = new pg.Client({ connectionString: postgres.adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  return postgres.adminUrl.replace(/\/postgres$/, `/${name}`)
}

async function stop (target: Target): Promise<void> {
  if (target.process.exitCode !== null || target.process.signalCode !== null) return
  const exited = new Promise((resolve) => target.process.once('exit', resolve))
  process.kill(target.process.pid as number, 'SIGTERM')
  const timer = setTimeout(() => { if (target.process.exitCode === null) process.kill(target.process.pid as number, 'SIGKILL') }, 10_000)
  await exited
  clearTimeout(timer)
}

function logSample (round: number, key: string, sample: Sample): void {
  process.stderr.write(`round ${round} ${key}: ${Math.round(sample.rps)} req/s, p99 ${sample.p99} ms, ` +
    `server ${sample.serverCpuUs.toFixed(1)} µs/req, ${generator.name} ${Math.round(sample.generatorCpuShare * 100)} % of a core\n`)
}

/** A measured target and load, with its ratios to the reference named in `against` (itself for the reference). */
type Row = ReturnType<typeof summarize> & { target: string, load: string, ratio: number, cpuRatio: number, against: string }

async function compareBackends (): Promise<Row[]> {
  const targets = [
    await startProcess('baseline', [process.execPath, ...benchNodeFlags(serviceNodeFlags(ROOT)), '--import', 'tsx', 'bench/baseline.ts'], {}),
    await startService('sqlite', `sqlite:${join(workFolder, 'bench.db')}`),
    await startService('postgres', await startPostgresDatabase()),
    await startService('memory', 'memory:')
  ]
  for (const target of targets) await preload(target, PRELOADED)

  const samples = new Map<string, Sample[]>()
  for (let round = 1; round <= rounds; round++) {
    for (const load of LOADS) {
      for (const target of targets) {
        const sample = await measure(target, load, durationSeconds)
        const key = `${target.name}/${load}`
        samples.set(key, [...(samples.get(key) ?? []), sample])
        logSample(round, key, sample)
      }
    }
  }
  // Idle servers would still share CPU 0 with whatever is measured next.
  for (const target of targets) await stop(target)

  const rows = targets.flatMap((target) => LOADS.map((load) => {
    const summary = summarize(samples.get(`${target.name}/${load}`) ?? [])
    const baseline = summarize(samples.get(`baseline/${load}`) ?? [])
    return {
      target: target.name,
      load,
      ...summary,
      ratio: Number((summary.rps / baseline.rps).toFixed(2)),
      cpuRatio: Number((summary.serverCpuUs / baseline.serverCpuUs).toFixed(2)),
      against: 'baseline'
    }
  }))
  printTable(rows)
  return rows
}

const TOKEN_LOADS = ['post', 'get'] as const
const ENVIRONMENT_TARGET = 'sqlite-environment-token'
const STORE_TARGET = 'sqlite-store-token'
/** The issue's bound: a store token's figures within 3 % of an environment token's. */
const TOKEN_TOLERANCE = 0.03

/**
 * Is a token kept in the store as cheap as one from `PLANTSTORE_TOKENS`? One SQLite service accepts
 * both (a second process would add its own drift to a 3 % question): `bench-token` from the
 * environment (`bench-token_` and random characters, as long as a generated token), and
 * `bench-store`, made with an admin entry of `PLANTSTORE_TOKENS` through
 * `POST /admin/tokens`, both with `plants:read plants:write`. The two are measured in interleaved
 * rounds like the backends, POST and GET by id; within a round their order alternates, so that a
 * drift within a round does not always favour the same one. The database is shared, so both POST
 * into the same growing table: the alternation spreads that too.
 */
async function compareTokens (): Promise<Row[]> {
  const adminToken = `pst_${randomBytes(32).toString('base64url')}`
  // As long as a generated token (`pst_` and 43 characters): the header, its b64token check and the
  // hash of the remembered-token lookup cost by the character, and the rows compare sources, not lengths.
  const environmentToken = `${TOKEN}_${randomBytes(32).toString('base64url')}`.slice(0, 47)
  const service = await startService('tokens', `sqlite:${join(workFolder, 'tokens.db')}`, {
    PLANTSTORE_TOKENS: `name=${ENVIRONMENT_TOKEN_NAME};${environmentToken},name=bench-admin;scopes=admin;${adminToken}`
  })
  const storeToken = await createStoreToken(service.url, adminToken)
  if (storeToken.length !== environmentToken.length) throw new Error(`the store token has ${storeToken.length} characters, the environment token ${environmentToken.length}`)
  const environment: Target = { ...service, name: ENVIRONMENT_TARGET, token: environmentToken }
  const store: Target = { ...service, name: STORE_TARGET, token: storeToken }
  // One id sequence for both: every POST measurement inserts above all the ids before it, as in the
  // backends' rows (appending to the table's B-tree), and never repeats an id of the other target
  // (an idempotent repeat, not an insert). Ranges of their own would have one target insert into the
  // middle of the table, a different and dearer write.
  let nextId = 1_000_000_000_000n
  const measureNext = async (target: Target, load: Load, seconds: number) => {
    target.nextId = nextId
    const sample = await measure(target, load, seconds)
    nextId = target.nextId
    return sample
  }
  await preload(environment, PRELOADED)
  store.preloadedIds = environment.preloadedIds
  await checkTokenSources(service.url, adminToken, storeToken)
  // Not recorded: the first requests with a token, and the code paths the preload did not run.
  for (const load of TOKEN_LOADS) for (const target of [environment, store]) await measureNext(target, load, 1)

  const samples = new Map<string, Sample[]>()
  for (let round = 1; round <= rounds; round++) {
    for (const load of TOKEN_LOADS) {
      for (const target of round % 2 === 1 ? [environment, store] : [store, environment]) {
        const sample = await measureNext(target, load, durationSeconds)
        const key = `${target.name}/${load}`
        samples.set(key, [...(samples.get(key) ?? []), sample])
        logSample(round, key, sample)
      }
    }
  }
  await stop(service)

  // Tenths of a µs and three decimals in the ratios: the question is about 3 % of some 40 µs.
  const rows = TOKEN_LOADS.flatMap((load) => {
    const reference = summarize(samples.get(`${ENVIRONMENT_TARGET}/${load}`) ?? [], 1)
    return [ENVIRONMENT_TARGET, STORE_TARGET].map((target) => {
      const summary = summarize(samples.get(`${target}/${load}`) ?? [], 1)
      return {
        target,
        load,
        ...summary,
        ratio: Number((summary.rps / reference.rps).toFixed(3)),
        cpuRatio: Number((summary.serverCpuUs / reference.serverCpuUs).toFixed(3)),
        against: ENVIRONMENT_TARGET
      }
    })
  })
  printTokenTable(rows, samples)
  return rows
}

async function createStoreToken (url: string, adminToken: string): Promise<string> {
  const response = await fetch(`${url}/admin/tokens`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: STORE_TOKEN_NAME, scopes: ['plants:read', 'plants:write'] })
  })
  const body = await response.text()
  if (response.status !== 201) throw new Error(`POST /admin/tokens answered ${response.status}: ${body}`)
  return (JSON.parse(body) as { token: string }).token
}

/** That the two tokens are what the rows say: one of each source, same scopes, and the store's accepted. */
async function checkTokenSources (url: string, adminToken: string, storeToken: string): Promise<void> {
  const response = await fetch(`${url}/admin/tokens`, { headers: { authorization: `Bearer ${adminToken}` } })
  const tokens = await response.json() as Array<{ name: string, source: string, scopes: string[] }>
  const source = (name: string) => tokens.find((token) => token.name === name)
  const scopesOf = (name: string) => [...source(name)?.scopes ?? []].sort().join(' ')
  if (source(ENVIRONMENT_TOKEN_NAME)?.source !== 'environment' || source(STORE_TOKEN_NAME)?.source !== 'store' ||
    scopesOf(ENVIRONMENT_TOKEN_NAME) !== scopesOf(STORE_TOKEN_NAME)) {
    throw new Error(`GET /admin/tokens does not show one environment and one store token with the same scopes: ${JSON.stringify(tokens)}`)
  }
  const read = await fetch(`${url}/plants/1`, { headers: { authorization: `Bearer ${storeToken}` } })
  if (read.status !== 200) throw new Error(`GET /plants/1 with the store token answered ${read.status}`)
}

function printTokenTable (rows: Row[], samples: Map<string, Sample[]>): void {
  const title = { post: 'POST', get: 'GET by id' } as Record<string, string>
  const header = ['comparison', 'req/s env', 'req/s store', 'req/s ÷', 'µs/req env', 'µs/req store', 'CPU ÷',
    'per-round req/s ÷', 'per-round CPU ÷', 'p99 ms env/store', 'errors', `${generator.name} CPU`, `within ${TOKEN_TOLERANCE * 100} %`]
  const lines = TOKEN_LOADS.map((load) => {
    const environment = rows.find((row) => row.target === ENVIRONMENT_TARGET && row.load === load) as Row
    const store = rows.find((row) => row.target === STORE_TARGET && row.load === load) as Row
    // Paired by round: how much of the median ratio is noise.
    const perRound = (measure: 'rps' | 'serverCpuUs') => {
      const ratios = (samples.get(`${STORE_TARGET}/${load}`) ?? []).map((sample, index) =>
        sample[measure] / (samples.get(`${ENVIRONMENT_TARGET}/${load}`)?.[index]?.[measure] ?? NaN))
      return `${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}`
    }
    const generatorShare = Math.max(environment.generatorCpuShare, store.generatorCpuShare)
    const within = Math.abs(store.ratio - 1) <= TOKEN_TOLERANCE && Math.abs(store.cpuRatio - 1) <= TOKEN_TOLERANCE
    return [`${title[load] ?? load}, store token ÷ environment token`, String(environment.rps), String(store.rps), store.ratio.toFixed(3),
      String(environment.serverCpuUs), String(store.serverCpuUs), store.cpuRatio.toFixed(3),
      perRound('rps'), perRound('serverCpuUs'), `${environment.p99}/${store.p99}`,
      String(environment.errors + store.errors),
      `${Math.round(generatorShare * 100)} %${environment.valid && store.valid ? '' : ' INVALID'}`, within ? 'yes' : 'no']
  })
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)).join('  ')
  process.stdout.write(`\nSQLite, one service, token ${ENVIRONMENT_TOKEN_NAME} (PLANTSTORE_TOKENS) against ${STORE_TOKEN_NAME} (POST /admin/tokens), both 47 characters; ` +
    `medians of ${rounds} round${rounds === 1 ? '' : 's'} of ${durationSeconds} s, ratios store ÷ environment\n${format(header)}\n${lines.map(format).join('\n')}\n`)
}

const UPDATES_TARGET = 'sqlite-updates'
/** Each load of the updates part and the load it is compared with. */
const UPDATE_LOADS: ReadonlyArray<readonly [Load, Load]> = [['post', 'post'], ['put', 'post'], ['patch', 'post'], ['list', 'list'], ['list-tag', 'list']]
/** The issue's bound: PUT and PATCH within 10 % of POST, a page of one tag within 10 % of an unfiltered page. */
const UPDATE_TOLERANCE = 0.1
/** The order of a round: each load next to the one it is compared with. */
const UPDATE_ORDER: readonly Load[] = ['put', 'post', 'patch', 'list', 'list-tag']
/** More rounds than the other parts, and shorter: each ratio is a median of per-round ratios. */
const updateRounds = quick ? 1 : 9

/**
 * Do changes cost what creates cost, and a filtered page what a page costs? One SQLite service, its
 * 2000 preloaded plants a quarter each of four tags. POST creates new plants; PUT replaces and PATCH
 * renames the preloaded ones, in turn, so no two requests in flight name the same plant (group commit
 * would give them batches of their own); `list` is the first page of 100 plants, `list-tag` the first
 * page of the 100 plants with one tag, read through its index. Interleaved rounds, each load next to the
 * one it is compared with, the order reversed every other round; each ratio is the median of the
 * rounds' own ratios, which drift between rounds does not move.
 */
async function compareUpdates (): Promise<Row[]> {
  const service = await startService(UPDATES_TARGET, `sqlite:${join(workFolder, 'updates.db')}`)
  await preload(service, PRELOADED)
  await checkFullPages(service)
  for (const [load] of UPDATE_LOADS) await measure(service, load, 1)

  const samples = new Map<string, Sample[]>()
  for (let round = 1; round <= updateRounds; round++) {
    const loads = [...UPDATE_ORDER]
    for (const load of round % 2 === 1 ? loads : loads.reverse()) {
      const sample = await measure(service, load, durationSeconds)
      const key = `${UPDATES_TARGET}/${load}`
      samples.set(key, [...(samples.get(key) ?? []), sample])
      logSample(round, key, sample)
    }
  }
  await stop(service)

  // Ratios are medians of each round's own ratio: the two loads of a ratio run next to each other in
  // every round, so a machine that speeds up or slows down between rounds moves both alike.
  const pairedRatio = (load: Load, reference: Load, measure: 'rps' | 'serverCpuUs') => median(
    (samples.get(`${UPDATES_TARGET}/${load}`) ?? []).map((sample, index) =>
      sample[measure] / (samples.get(`${UPDATES_TARGET}/${reference}`)?.[index]?.[measure] ?? NaN)))
  const rows = UPDATE_LOADS.map(([load, reference]) => ({
    target: UPDATES_TARGET,
    load,
    ...summarize(samples.get(`${UPDATES_TARGET}/${load}`) ?? [], 1),
    ratio: Number(pairedRatio(load, reference, 'rps').toFixed(3)),
    cpuRatio: Number(pairedRatio(load, reference, 'serverCpuUs').toFixed(3)),
    against: `${UPDATES_TARGET}/${reference}`
  }))
  printUpdatesTable(rows, samples)
  return rows
}

/** That the two list loads read what the rows say: a page of 100 plants each, the filtered one all of one tag. */
async function checkFullPages (target: Target): Promise<void> {
  for (const path of ['/plants?limit=100', `/plants?limit=100&tag=${LISTED_TAG}`]) {
    const response = await fetch(`${target.url}${path}`, { headers: { authorization: `Bearer ${target.token}` } })
    const page = await response.json() as Array<{ tag?: string }>
    if (response.status !== 200 || page.length !== 100 || (path.includes('tag=') && page.some((plant) => plant.tag !== LISTED_TAG))) {
      throw new Error(`GET ${path} answered ${response.status} with ${page.length} plants, not a page of 100`)
    }
  }
}

function printUpdatesTable (rows: Row[], samples: Map<string, Sample[]>): void {
  const header = ['load', 'against', 'req/s', 'req/s ÷', 'µs/req', 'CPU ÷', 'per-round req/s ÷', 'p99 ms', 'errors', `${generator.name} CPU`,
    `within ${UPDATE_TOLERANCE * 100} %`]
  const lines = rows.map((row) => {
    const reference = row.against.slice(UPDATES_TARGET.length + 1)
    const ratios = (samples.get(`${UPDATES_TARGET}/${row.load}`) ?? []).map((sample, index) =>
      sample.rps / (samples.get(row.against)?.[index]?.rps ?? NaN))
    const within = row.ratio >= 1 - UPDATE_TOLERANCE
    return [row.load, reference, String(row.rps), row.ratio.toFixed(3), String(row.serverCpuUs), row.cpuRatio.toFixed(3),
      `${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}`, String(row.p99), String(row.errors),
      `${Math.round(row.generatorCpuShare * 100)} %${row.valid ? '' : ' INVALID'}`, row.load === reference ? '' : within ? 'yes' : 'no']
  })
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => column < 2 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)).join('  ')
  process.stdout.write(`\nSQLite, one service: changes ÷ creates, a page of one tag ÷ a page of all; medians of ${updateRounds} ` +
    `round${updateRounds === 1 ? '' : 's'} of ${durationSeconds} s, ratios the medians of each round's ratio\n${format(header)}\n${lines.map(format).join('\n')}\n`)
}

const WEBHOOKS_NONE = 'sqlite-no-subscription'
const WEBHOOKS_OUTBOX = 'sqlite-webhooks-recorded'
const WEBHOOKS_DELIVERING = 'sqlite-webhooks-delivered'
/** The issue's bound: POST with an active subscription within 10 % of POST without. */
const WEBHOOK_TOLERANCE = 0.1
const WEBHOOK_ADMIN_TOKEN = `bench-admin-${randomBytes(16).toString('hex')}`
/** A drain that takes longer than this is reported as not finished. */
const DRAIN_LIMIT_MS = 120_000

interface DeliveryFigures {
  /** Deliveries the receiver counted while the load ran, per second. */
  readonly deliveriesPerSecond: number
  /** Events recorded but not delivered yet when the load stopped. */
  readonly backlogAtEnd: number
  /** From the end of the load until nothing was pending, in seconds. */
  readonly drainSeconds: number
  /** Deliveries per second while draining. */
  readonly drainPerSecond: number
}

/**
 * What an active subscription costs a POST, and whether delivery keeps up. Three SQLite services: one
 * without a subscription; one with a subscription whose events it records but does not deliver
 * (WEBHOOK_DELIVERY=false: the outbox row riding the write's batch, nothing else); one that also
 * delivers them to a local receiver (on the load generator's core, counting what arrives). Interleaved
 * rounds of POST; after each round the delivering service drains its backlog while nothing else runs,
 * timed. Ratios are medians of each round's own ratio to the service without a subscription.
 */
async function compareWebhooks (): Promise<Row[]> {
  const receiver = await startProcess('webhook-receiver', [process.execPath, '--import', 'tsx', 'bench/webhook-receiver.ts'], {}, 1)
  const tokens = `${TOKEN},name=bench-admin;scopes=admin;${WEBHOOK_ADMIN_TOKEN}`
  const none = await startService(WEBHOOKS_NONE, `sqlite:${join(workFolder, 'webhooks-none.db')}`, { PLANTSTORE_TOKENS: tokens })
  const recorded = await startService(WEBHOOKS_OUTBOX, `sqlite:${join(workFolder, 'webhooks-recorded.db')}`,
    { PLANTSTORE_TOKENS: tokens, WEBHOOK_DELIVERY: 'false', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
  const delivering = await startService(WEBHOOKS_DELIVERING, `sqlite:${join(workFolder, 'webhooks-delivered.db')}`,
    { PLANTSTORE_TOKENS: tokens, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
  await subscribeReceiver(recorded, receiver.url)
  const subscription = await subscribeReceiver(delivering, receiver.url)
  const targets = [none, recorded, delivering]
  for (const target of targets) await measure(target, 'post', 1)
  await drain(delivering, subscription)

  const samples = new Map<string, Sample[]>()
  const figures: DeliveryFigures[] = []
  for (let round = 1; round <= updateRounds; round++) {
    for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
      const receivedBefore = await receivedCount(receiver.url)
      const startedAt = Date.now()
      const sample = await measure(target, 'post', durationSeconds)
      const loadSeconds = (Date.now() - startedAt) / 1000
      samples.set(target.name, [...(samples.get(target.name) ?? []), sample])
      logSample(round, `${target.name}/post`, sample)
      if (target !== delivering) continue
      const receivedDuring = await receivedCount(receiver.url) - receivedBefore
      const backlogAtEnd = await pendingEvents(delivering, subscription)
      const drainSeconds = await drain(delivering, subscription)
      figures.push({ deliveriesPerSecond: receivedDuring / loadSeconds, backlogAtEnd, drainSeconds, drainPerSecond: drainSeconds === 0 ? 0 : backlogAtEnd / drainSeconds })
      process.stderr.write(`round ${round} deliveries: ${Math.round(receivedDuring / loadSeconds)}/s during the load, backlog ${backlogAtEnd}, drained in ${drainSeconds.toFixed(1)} s\n`)
    }
  }
  const counted = await receiverCounts(receiver.url)
  for (const target of [...targets, receiver]) await stop(target)

  const pairedRatio = (name: string, measure: 'rps' | 'serverCpuUs') => median(
    (samples.get(name) ?? []).map((sample, index) => sample[measure] / (samples.get(WEBHOOKS_NONE)?.[index]?.[measure] ?? NaN)))
  const rows = targets.map((target) => ({
    target: target.name,
    load: 'post',
    ...summarize(samples.get(target.name) ?? [], 1),
    ratio: Number(pairedRatio(target.name, 'rps').toFixed(3)),
    cpuRatio: Number(pairedRatio(target.name, 'serverCpuUs').toFixed(3)),
    against: WEBHOOKS_NONE,
    ...(target === delivering
      ? {
          deliveries: {
            perSecondDuringLoad: Math.round(median(figures.map((figure) => figure.deliveriesPerSecond))),
            backlogAtEnd: Math.round(median(figures.map((figure) => figure.backlogAtEnd))),
            drainSeconds: Number(median(figures.map((figure) => figure.drainSeconds)).toFixed(2)),
            perSecondWhileDraining: Math.round(median(figures.map((figure) => figure.drainPerSecond))),
            received: counted.received,
            duplicated: counted.received - counted.distinct
          }
        }
      : {})
  }))
  printWebhooksTable(rows)
  return rows
}

async function subscribeReceiver (target: Target, receiverUrl: string): Promise<string> {
  const response = await fetch(`${target.url}/admin/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${WEBHOOK_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${receiverUrl}/hooks`, events: ['plant.created'] })
  })
  if (response.status !== 201) throw new Error(`${target.name}: POST /admin/webhooks answered ${response.status}: ${await response.text()}`)
  return (await response.json() as { id: string }).id
}

async function pendingEvents (target: Target, subscription: string): Promise<number> {
  const response = await fetch(`${target.url}/admin/webhooks/${subscription}`, { headers: { authorization: `Bearer ${WEBHOOK_ADMIN_TOKEN}` } })
  return (await response.json() as { pending: number }).pending
}

/** Waits until the subscription has nothing pending; returns how long that took, in seconds. */
async function drain (target: Target, subscription: string): Promise<number> {
  const startedAt = Date.now()
  while (await pendingEvents(target, subscription) > 0) {
    if (Date.now() - startedAt > DRAIN_LIMIT_MS) throw new Error(`${target.name}: the webhook backlog did not drain within ${DRAIN_LIMIT_MS / 1000} s`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return (Date.now() - startedAt) / 1000
}

async function receiverCounts (receiverUrl: string): Promise<{ received: number, distinct: number }> {
  return await (await fetch(`${receiverUrl}/count`)).json() as { received: number, distinct: number }
}

async function receivedCount (receiverUrl: string): Promise<number> {
  return (await receiverCounts(receiverUrl)).received
}

function printWebhooksTable (rows: Array<Row & { deliveries?: Record<string, number> }>): void {
  const header = ['target', 'req/s', 'req/s ÷', 'µs/req', 'CPU ÷', 'p99 ms', 'errors', `${generator.name} CPU`, `within ${WEBHOOK_TOLERANCE * 100} %`]
  const lines = rows.map((row) => [row.target, String(row.rps), row.ratio.toFixed(3), String(row.serverCpuUs), row.cpuRatio.toFixed(3),
    String(row.p99), String(row.errors), `${Math.round(row.generatorCpuShare * 100)} %${row.valid ? '' : ' INVALID'}`,
    row.target === WEBHOOKS_NONE ? '' : row.ratio >= 1 - WEBHOOK_TOLERANCE ? 'yes' : 'no'])
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)).join('  ')
  const deliveries = rows.find((row) => row.deliveries !== undefined)?.deliveries
  process.stdout.write(`\nSQLite, POST with and without a webhook subscription; medians of ${updateRounds} round${updateRounds === 1 ? '' : 's'} of ` +
    `${durationSeconds} s, ratios the medians of each round's ratio to ${WEBHOOKS_NONE}\n${format(header)}\n${lines.map(format).join('\n')}\n`)
  if (deliveries !== undefined) {
    process.stdout.write(`deliveries: ${deliveries.perSecondDuringLoad}/s during the load, backlog ${deliveries.backlogAtEnd} when it stopped, ` +
      `drained in ${deliveries.drainSeconds} s (${deliveries.perSecondWhileDraining}/s); the receiver got ${deliveries.received}, ` +
      `${deliveries.duplicated} of them a second time\n`)
  }
}

const METRICS_OFF = 'metrics-off'
const METRICS_ON = 'metrics-on'
const TRACING_ON = 'tracing-on'
const RELEASE = 'release'
const OBSERVABILITY_LOADS = ['post', 'get'] as const
/** The issue's bound: metrics on (the default) cost at most 5 % of POST and GET throughput; here also of CPU per request. */
const METRICS_TOLERANCE = 0.05
/**
 * Many short rounds, each ratio the median of the rounds' own ratios; more than the other parts
 * have, as each round's new processes differ by up to a tenth among themselves.
 */
const observabilityRounds = quick ? 1 : 15
/** Scrapes timed one after another on an idle service, for the CPU time of one. */
const TIMED_SCRAPES = 200

interface SinkCounts {
  readonly requests: number
  readonly bytes: number
  readonly spans: number
  readonly byName: Readonly<Record<string, number>>
  readonly refused: number
}

/**
 * What metrics and tracing cost a request. SQLite services of this build, each with its own file:
 * metrics off (METRICS_PORT=0, no OTEL_* variable: the reference), metrics on (the shipped default,
 * tracing off), and metrics on with tracing at 100 % sampling (OTEL_TRACES_SAMPLER=always_on),
 * exporting OTLP/HTTP (protobuf, the default) to `bench/otlp-sink.ts`, which runs on the load
 * generator's core, counts spans and discards them. With `--baseline-dist` a `release` service runs
 * another build's dist/server.js in the same rounds: whether tracing off costs anything against a
 * release without any of it. POST of new plants and GET by id of the 2000 preloaded ones in
 * interleaved rounds, each round with new processes on the same files (warmed up for 1 s a load), the
 * order of the services reversed every other round; ratios are medians of each round's own ratio to
 * metrics off. The sink's CPU share is recorded next to wrk's: both take
 * the same core, and their sum decides whether the tracing measurement is valid.
 */
async function compareObservability (): Promise<Row[]> {
  process.stderr.write(`observability: load average ${loadavg().map((load) => load.toFixed(2)).join(' ')} at the start\n`)
  const sink = await startProcess('otlp-sink', [process.execPath, '--import', 'tsx', 'bench/otlp-sink.ts'], {}, 1)
  const sinkPid = serverPid(sink) as number
  const services: ReadonlyArray<{ readonly name: string, readonly env: Record<string, string>, readonly root?: string }> = [
    { name: METRICS_OFF, env: { METRICS_PORT: '0' } },
    { name: METRICS_ON, env: {} },
    { name: TRACING_ON, env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER: 'always_on' } },
    ...(baselineRoot === undefined ? [] : [{ name: RELEASE, env: {}, root: baselineRoot }])
  ]
  // Every service's POST ids go on rising from round to round: each round's processes open the files of the round before.
  const nextIds = new Map(services.map((service) => [service.name, 1_000_000_000_000n]))
  // Requests the tracing services answered, by load, for the spans the sink should have got; and the
  // POSTs the last metrics-on process answered, for its request counter.
  const traced = { post: PRELOADED, get: 0 }
  let metricsOnPosts = 0
  const count = (target: Target, load: typeof OBSERVABILITY_LOADS[number], sample: Sample) => {
    if (target.name === TRACING_ON) traced[load] += sample.requests
    if (target.name === METRICS_ON && load === 'post') metricsOnPosts += sample.requests
  }

  const samples = new Map<string, Sample[]>()
  const sinkShares: Record<typeof OBSERVABILITY_LOADS[number], number[]> = { post: [], get: [] }
  let scrape: ScrapeFigures & { postsAnswered: number } | undefined
  for (let round = 1; round <= observabilityRounds; round++) {
    // New processes every round: a process's own state (its heap's sizing, and more not found) moved a service's
    // CPU a request by up to a sixth against another's for a whole run, in either direction
    // (docs/benchmarks.md, 2026-11-23 21:42 UTC); across rounds it is drift that the medians absorb.
    const targets: Target[] = []
    for (const service of services) {
      const target = await startService(service.name, `sqlite:${join(workFolder, `${service.name}.db`)}`, service.env, service.root)
      targets.push(target)
      target.nextId = nextIds.get(service.name) ?? target.nextId
      if (round === 1) await preload(target, PRELOADED)
      else target.preloadedIds = Array.from({ length: PRELOADED }, (_, index) => BigInt(index + 1))
    }
    checkObservabilityConfigurations(targets)
    metricsOnPosts = round === 1 ? PRELOADED : 0
    // Not recorded: each process's first requests of each load.
    for (const load of OBSERVABILITY_LOADS) {
      for (const target of targets) count(target, load, await measure(target, load, 1))
    }
    for (const load of OBSERVABILITY_LOADS) {
      for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
        const sinkCpuBefore = processCpuSeconds(sinkPid)
        const startedAt = performance.now()
        const sample = await measure(target, load, durationSeconds)
        const sinkShare = (processCpuSeconds(sinkPid) - sinkCpuBefore) / ((performance.now() - startedAt) / 1000)
        const key = `${target.name}/${load}`
        samples.set(key, [...(samples.get(key) ?? []), sample])
        logSample(round, key, sample)
        count(target, load, sample)
        if (target.name !== TRACING_ON) continue
        sinkShares[load].push(sinkShare)
        process.stderr.write(`round ${round} ${key}: the OTLP sink used ${Math.round(sinkShare * 100)} % of the load generator's core\n`)
      }
    }
    const metricsOn = targets.find((target) => target.name === METRICS_ON) as Target
    if (round === observabilityRounds) scrape = { ...await scrapeFigures(metricsOn), postsAnswered: metricsOnPosts }
    // A graceful stop exports the spans still queued (for at most 2 s).
    for (const target of targets) {
      nextIds.set(target.name, target.nextId)
      await stop(target)
    }
  }
  const spans = await (await fetch(`${sink.url}/count`)).json() as SinkCounts
  await stop(sink)
  process.stderr.write(`observability: load average ${loadavg().map((load) => load.toFixed(2)).join(' ')} at the end\n`)
  if (scrape === undefined) throw new Error('no round was measured')

  const pairedRatios = (name: string, load: string, measure: 'rps' | 'serverCpuUs', reference: string) =>
    (samples.get(`${name}/${load}`) ?? []).map((sample, index) => sample[measure] / (samples.get(`${reference}/${load}`)?.[index]?.[measure] ?? NaN))
  const pairedRatio = (name: string, load: string, measure: 'rps' | 'serverCpuUs', reference = METRICS_OFF) =>
    Number(median(pairedRatios(name, load, measure, reference)).toFixed(3))
  const rows = OBSERVABILITY_LOADS.flatMap((load) => services.map((target) => {
    const measured = samples.get(`${target.name}/${load}`) ?? []
    const summary = summarize(measured, 1)
    const sinkCpuShares = target.name === TRACING_ON ? sinkShares[load] : undefined
    // The sink takes the generator's core: what that core did is wrk's share and the sink's together.
    const busiestCore = Math.max(...measured.map((sample, index) => sample.generatorCpuShare + (sinkCpuShares?.[index] ?? 0)))
    return {
      target: target.name,
      load,
      ...summary,
      valid: busiestCore < SATURATED_GENERATOR,
      ratio: pairedRatio(target.name, load, 'rps'),
      cpuRatio: pairedRatio(target.name, load, 'serverCpuUs'),
      against: METRICS_OFF,
      perRound: {
        ratio: pairedRatios(target.name, load, 'rps', METRICS_OFF).map((ratio) => Number(ratio.toFixed(3))),
        cpuRatio: pairedRatios(target.name, load, 'serverCpuUs', METRICS_OFF).map((ratio) => Number(ratio.toFixed(3))),
        generatorCpuShare: measured.map((sample) => Number(sample.generatorCpuShare.toFixed(2))),
        pageFaultsPerRequest: measured.map((sample) => Number(sample.pageFaultsPerRequest.toFixed(2))),
        ...(sinkCpuShares === undefined ? {} : { sinkCpuShare: sinkCpuShares.map((share) => Number(share.toFixed(2))) })
      },
      ...(baselineRoot === undefined || target.name === RELEASE
        ? {}
        : { againstRelease: { ratio: pairedRatio(target.name, load, 'rps', RELEASE), cpuRatio: pairedRatio(target.name, load, 'serverCpuUs', RELEASE) } }),
      ...(target.name === RELEASE && baselineRoot !== undefined ? { build: `${releaseVersion(baselineRoot)} (${baselineRoot})` } : {}),
      ...(target.name === TRACING_ON ? { exported: { ...spans, requestsAnswered: traced[load] } } : {}),
      ...(target.name === METRICS_ON && load === 'post' ? { scrape } : {})
    }
  }))
  printObservabilityTable(rows, spans, traced, scrape)
  return rows
}

const releaseVersion = (root: string) => (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version

/** That each service runs as its row says: metrics on only where asked, tracing on only where asked. */
function checkObservabilityConfigurations (targets: readonly Target[]): void {
  const tracingAnnounced = (target: Target) => readFileSync(join(workFolder, `${target.name}.log`), 'utf8').includes('tracing on')
  const named = (name: string) => targets.find((target) => target.name === name) as Target
  if (named(METRICS_OFF).metricsUrl !== undefined || named(METRICS_ON).metricsUrl === undefined || named(TRACING_ON).metricsUrl === undefined) {
    throw new Error('metrics-off must run with METRICS_PORT=0, metrics-on and tracing-on with a metrics port')
  }
  if (tracingAnnounced(named(METRICS_OFF)) || tracingAnnounced(named(METRICS_ON)) || !tracingAnnounced(named(TRACING_ON))) {
    throw new Error('tracing must be on in tracing-on only (its start logs "tracing on")')
  }
}

interface ScrapeFigures {
  /** POST /plants 200s in http_request_duration_seconds_count at the end of the rounds. */
  readonly postsCounted: number
  /** The server's CPU time for one scrape of GET /metrics, in ms: TIMED_SCRAPES in a row, timed together. */
  readonly cpuMsPerScrape: number
  readonly bytes: number
}

/**
 * That metrics-on counted its requests (the POSTs of the last round's process), and what a scrape
 * costs it: a scrape's work is per scrape, not per request, so the rounds run without one.
 */
async function scrapeFigures (target: Target): Promise<ScrapeFigures> {
  const url = `${target.metricsUrl ?? ''}/metrics`
  const text = await (await fetch(url)).text()
  const postsLine = text.split('\n').find((line) => line.startsWith('http_request_duration_seconds_count{') &&
    line.includes('method="POST"') && line.includes('route="/plants"') && line.includes('status_code="200"'))
  const pid = serverPid(target) as number
  const cpuBefore = processCpuSeconds(pid)
  for (let scrape = 0; scrape < TIMED_SCRAPES; scrape++) await (await fetch(url)).text()
  return {
    postsCounted: Number(postsLine?.split(' ').at(-1) ?? NaN),
    cpuMsPerScrape: Number(((processCpuSeconds(pid) - cpuBefore) / TIMED_SCRAPES * 1000).toFixed(2)),
    bytes: Buffer.byteLength(text)
  }
}

function printObservabilityTable (rows: Array<Row & { perRound: { ratio: number[], cpuRatio: number[], pageFaultsPerRequest: number[], sinkCpuShare?: number[] }, againstRelease?: { ratio: number, cpuRatio: number } }>,
  spans: SinkCounts, traced: { post: number, get: number }, scrape: ScrapeFigures & { postsAnswered: number }): void {
  const range = (values: number[]) => `${Math.min(...values).toFixed(3)}–${Math.max(...values).toFixed(3)}`
  const header = ['target', 'load', 'req/s', 'req/s ÷ off', 'per-round ÷', 'µs CPU/req', 'CPU ÷ off', 'per-round CPU ÷', 'p50 ms', 'p99 ms',
    'page faults/req', 'errors', `${generator.name} CPU`, 'sink CPU', `within ${METRICS_TOLERANCE * 100} %`]
  const lines = rows.map((row) => [row.target, row.load, String(row.rps), row.ratio.toFixed(3), range(row.perRound.ratio), String(row.serverCpuUs),
    row.cpuRatio.toFixed(3), range(row.perRound.cpuRatio), String(row.p50), String(row.p99), median(row.perRound.pageFaultsPerRequest).toFixed(2), String(row.errors),
    `${Math.round(row.generatorCpuShare * 100)} %${row.valid ? '' : ' INVALID'}`,
    row.perRound.sinkCpuShare === undefined ? '' : `${Math.round(Math.max(...row.perRound.sinkCpuShare) * 100)} %`,
    row.target !== METRICS_ON ? '' : row.ratio >= 1 - METRICS_TOLERANCE && row.cpuRatio <= 1 + METRICS_TOLERANCE ? 'yes' : 'no'])
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => column < 2 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)).join('  ')
  process.stdout.write(`\nSQLite, metrics and tracing; medians of ${observabilityRounds} round${observabilityRounds === 1 ? '' : 's'} of ${durationSeconds} s, ` +
    `ratios the medians of each round's ratio to ${METRICS_OFF}; page faults/req: the server's minor page faults ÷ requests (median); sink CPU: the OTLP sink's share of the generator's core (the highest round)\n` +
    `${format(header)}\n${lines.map(format).join('\n')}\n`)
  const againstRelease = rows.filter((row) => row.againstRelease !== undefined)
  if (rows.some((row) => row.target === RELEASE)) {
    const build = (rows.find((row) => row.target === RELEASE) as { build?: string } | undefined)?.build ?? ''
    process.stdout.write(`against the release ${build} (medians of each round's ratio): ` +
      `${againstRelease.map((row) => `${row.target}/${row.load} ${row.againstRelease?.ratio.toFixed(3)} req/s, ${row.againstRelease?.cpuRatio.toFixed(3)} CPU`).join('; ')}\n`)
  }
  const named = (name: string) => spans.byName[name] ?? 0
  process.stdout.write(`the OTLP sink got ${spans.spans} spans in ${spans.requests} export requests (${Math.round(spans.bytes / 1e6)} MB, ` +
    `${spans.refused} refused): "POST /plants" ${named('POST /plants')} for ${traced.post} POSTs answered, "GET /plants/:id" ` +
    `${named('GET /plants/:id')} for ${traced.get} GETs; ${Object.entries(spans.byName).map(([name, count]) => `"${name}" ${count}`).join(', ')}\n`)
  process.stdout.write(`${METRICS_ON}: http_request_duration_seconds_count of POST /plants 200 was ${scrape.postsCounted} for ` +
    `${scrape.postsAnswered} POSTs answered; a scrape ` +
    `(${Math.round(scrape.bytes / 1024)} KiB) took ${scrape.cpuMsPerScrape} ms of its CPU (mean of ${TIMED_SCRAPES})\n`)
}

const partOf = (row: { against?: string }): Part =>
  row.against === ENVIRONMENT_TARGET
    ? 'tokens'
    : row.against?.startsWith(`${UPDATES_TARGET}/`) === true
      ? 'updates'
      : row.against === WEBHOOKS_NONE ? 'webhooks' : row.against === METRICS_OFF ? 'observability' : 'backends'

/**
 * Writes the rows of the parts measured. When some parts were not, their rows (and the machine they
 * were measured on) are kept from the file, and this run's machine goes to `partialRuns`.
 */
function writeResults (rows: Row[]): void {
  mkdirSync(RESULTS, { recursive: true })
  const file = quick ? 'quick' : 'latest'
  const path = join(RESULTS, `${file}.json`)
  let results: { machine: ReturnType<typeof machine>, rows: Row[], partialRuns?: Partial<Record<Part, ReturnType<typeof machine>>> }
  if (parts.length === PARTS.length || !existsSync(path)) {
    results = { machine: machine(), rows }
  } else {
    const earlier = JSON.parse(readFileSync(path, 'utf8')) as typeof results
    const partialRuns = { ...earlier.partialRuns }
    for (const part of parts) partialRuns[part] = part === 'observability' ? { ...machine(), rounds: observabilityRounds } : machine()
    results = {
      machine: earlier.machine,
      rows: [...earlier.rows.filter((row) => !parts.includes(partOf(row))), ...rows]
        .sort((a, b) => PARTS.indexOf(partOf(a)) - PARTS.indexOf(partOf(b))),
      partialRuns
    }
  }
  writeFileSync(path, JSON.stringify(results, null, 2) + '\n')
  const written = [`bench/results/${file}.json`]
  if (parts.includes('backends')) {
    writeFileSync(join(RESULTS, `${file}.svg`), renderChart(rows.filter((row) => partOf(row) === 'backends'), machine()))
    written.push(`bench/results/${file}.svg`)
  }
  process.stdout.write(`\nwrote ${written.join(' and ')}\n`)
}

function printTable (rows: Row[]): void {
  const header = ['target', 'load', 'req/s', '÷ baseline', 'p50 ms', 'p99 ms', 'server µs/req', 'CPU ÷ baseline', 'db µs/req', 'RSS MB', 'errors', `${generator.name} CPU`]
  const lines = rows.map((row) => [row.target, row.load, String(row.rps), row.ratio.toFixed(2), String(row.p50), String(row.p99),
    String(row.serverCpuUs), row.cpuRatio.toFixed(2), row.databaseCpuUs === 0 ? '' : String(row.databaseCpuUs), String(row.rssMb),
    String(row.errors), `${Math.round(row.generatorCpuShare * 100)} %${row.valid ? '' : ' INVALID'}`])
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join('  ')
  process.stdout.write(`\n${format(header)}\n${lines.map(format).join('\n')}\n`)
  const invalid = rows.filter((row) => !row.valid)
  if (invalid.length > 0) {
    process.stdout.write(`\nINVALID: the load generator was ${SATURATED_GENERATOR * 100} % busy or more in ${invalid.length} measurements ` +
      `(${invalid.map((row) => `${row.target}/${row.load}`).join(', ')}): their req/s measure the generator, not the server; ` +
      'compare their server µs/req instead\n')
  }
}

/** Bulk-loaded stores give LISTED_TAG to every `listedStep(size)`th plant: about 10,000 of them at any size. */
const listedStep = (size: number) => Math.max(1, Math.floor(size / 10_000))

async function bulkLoad (backend: 'sqlite' | 'postgres', size: number): Promise<string> {
  const step = listedStep(size)
  if (backend === 'sqlite') {
    const file = join(workFolder, `scale-${size}.db`)
    const db = openSqliteDatabase(file)
    db.pragma('synchronous = OFF')
    const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
    const chunk = db.transaction((from: number, to: number) => {
      for (let id = from; id < to; id++) insert.run(BigInt(id), `plant ${id}`, id % step === 0 ? LISTED_TAG : 'tag-0')
    })
    for (let from = 1; from <= size; from += 100_000) chunk(from, Math.min(from + 100_000, size + 1))
    db.close()
    return `sqlite:${file}`
  }
  const url = await startPostgresDatabase()
  // Opening the store once applies the migrations, as the service would.
  await (await openPostgresStore(url, { poolSize: 1, connectTimeoutMs: 5000, statementTimeoutMs: 600_000 })).close()
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(`INSERT INTO plants (id, name, tag)
    SELECT g, 'plant ' || g, CASE WHEN g % $2 = 0 THEN $3 ELSE 'tag-0' END FROM generate_series(1, $1::bigint) AS g`, [size, step, LISTED_TAG])
  await client.query('VACUUM ANALYZE plants')
  await client.end()
  return url
}

const SCALE_LOADS: readonly Load[] = [...LOADS, 'list-tag']

async function compareSizes (sizes: number[]): Promise<void> {
  const rows: Array<{ backend: string, size: number, load: Load } & ReturnType<typeof summarize>> = []
  for (const backend of ['sqlite', 'postgres'] as const) {
    // Every size is loaded and started first, then measured in interleaved rounds, so that the
    // machine's drift weighs on each size alike.
    const targets = []
    for (const size of [0, ...sizes]) {
      const started = Date.now()
      const databaseUrl = await bulkLoad(backend, size)
      process.stderr.write(`${backend}: loaded ${size} plants in ${Math.round((Date.now() - started) / 1000)} s\n`)
      const target = await startService(`${backend}-${size}`, databaseUrl)
      if (size === 0) await preload(target, PRELOADED)
      else target.preloadedIds = Array.from({ length: 10_000 }, () => BigInt(1 + Math.floor(Math.random() * size)))
      const results = new Map<Load, Sample[]>(SCALE_LOADS.map((load) => [load, []]))
      // The empty store's preload is 2000 plants: the deep pages start half-way through those.
      targets.push({ size, target, deepAfter: BigInt(Math.floor((size === 0 ? PRELOADED : size) / 2)), results })
    }
    for (let round = 1; round <= rounds; round++) {
      for (const load of SCALE_LOADS) {
        for (const { target, deepAfter, results } of targets) {
          const sample = await measure(target, load, durationSeconds, load === 'list' || load === 'list-tag' ? deepAfter : undefined)
          results.get(load)?.push(sample)
          process.stderr.write(`round ${round} ${target.name}/${load}: ${Math.round(sample.rps)} req/s, p99 ${sample.p99} ms\n`)
        }
      }
    }
    for (const { size, target, results } of targets) {
      for (const load of SCALE_LOADS) rows.push({ backend, size, load, ...summarize(results.get(load) ?? []) })
      process.kill(target.process.pid as number, 'SIGTERM')
      await new Promise((resolve) => target.process.once('exit', resolve))
    }
  }
  const withRatios = rows.map((row) => {
    const empty = rows.find((other) => other.backend === row.backend && other.load === row.load && other.size === 0)
    return { ...row, ratioToEmpty: Number((row.rps / (empty?.rps ?? row.rps)).toFixed(2)) }
  })
  const header = ['backend', 'plants', 'load', 'req/s', 'p99 ms', 'server µs/req', 'RSS MB', 'errors', '÷ empty', `${generator.name} CPU`]
  const lines = withRatios.map((row) => [row.backend, String(row.size), row.load, String(row.rps), String(row.p99), String(row.serverCpuUs),
    String(row.rssMb), String(row.errors), row.ratioToEmpty.toFixed(2), `${Math.round(row.generatorCpuShare * 100)} %${row.valid ? '' : ' INVALID'}`])
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join('  ')
  process.stdout.write(`\n${format(header)}\n${lines.map(format).join('\n')}\n`)
  mkdirSync(RESULTS, { recursive: true })
  writeFileSync(join(RESULTS, 'scale.json'), JSON.stringify({ machine: machine(), rows: withRatios }, null, 2) + '\n')
  process.stdout.write('\nwrote bench/results/scale.json\n')
}

try {
  if (scaleSizes !== undefined) {
    await compareSizes(scaleSizes)
  } else {
    const rows: Row[] = []
    if (parts.includes('backends')) rows.push(...await compareBackends())
    if (parts.includes('tokens')) rows.push(...await compareTokens())
    if (parts.includes('updates')) rows.push(...await compareUpdates())
    if (parts.includes('webhooks')) rows.push(...await compareWebhooks())
    if (parts.includes('observability')) rows.push(...await compareObservability())
    writeResults(rows)
  }
} finally {
  await cleanUp()
}
