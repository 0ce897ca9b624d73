import { mkdirSync, readFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { encodePageCursor } from '../../src/http/page-cursor.js'
import { listingOf } from '../../src/http/plant-listing.js'
import type { PlantListQuery } from '../../src/schemas/plants.js'
import { compareNames, foldName } from '../../src/store/plant-names.js'
import { countStatement, pageStatement } from '../../src/store/postgres/plant-pages.js'
import Database from '../../src/store/sqlite/driver.js'
import { IDLE, readProfiles, selfTimeIn, type SelfTime } from '../cpu-profile.js'
import { median, record, roundRatios, summarize, type Samples, type Summary } from '../figures.js'
import { PAIRED_ROUNDS, regimeLine, type Harness, type Part } from '../harness.js'
import { catalogBatches, CatalogIndex, checkFoldedWords, nameOf, searchTerms, tagOf, TAGS } from '../plant-catalog.js'
import { ROOT, serverPid, type Target } from '../processes.js'
import { asJson, describeRounds, formatTable, generatorCell, ratioRange, writeResultsFile } from '../report.js'
import { differenceTable, measureWindow, scaledByInterval, type Profiled, type ProfileWindow } from './profiles.js'
import { measureUpgrades } from './query-upgrades.js'

/**
 * `--only query`: finding plants at a million (issue 35). SQLite and PostgreSQL stores of the plants of
 * bench/plant-catalog.ts (100,000 with --quick, or BENCH_QUERY_PLANTS), loaded with SQL (folded names
 * by the service's own `foldName`, SQLite's search index rebuilt, PostgreSQL's trigram index built by
 * the service and VACUUM ANALYZE), and the bare-Fastify baseline holding the same plants. 50
 * connections, every request another page: each load is a list of paths walked from a random start
 * (load-generator.ts), so no two requests in flight read the same page or share a read:
 *
 *   id         a page of 100 in id order after a random id (the baseline's too)
 *   name       a page of 100 with sort=name at the cursor of a random plant (built as the service builds it)
 *   q          the first page of 100 of a random search term of 3 to 8 characters cut from the stored
 *              names, matching tens to thousands of plants
 *   count-tag  a page of 100 of a random tag of 1 in 100 plants (10,000 at a million), after a random
 *              id, with Prefer: count=exact
 *   count-q    a page of 100 of a random term matching about 10,000 plants, after a random id, with
 *              Prefer: count=exact
 *
 * The id page is compared with the baseline's, each other load with the same engine's id page: CPU per
 * request of the server process (all threads) and, for PostgreSQL, of the database, medians over
 * interleaved rounds of per-round ratios; after each measurement the server (and the database) finish
 * what it left in flight before the next one starts. Then, on the same stores: a walk of 10,000 plants and one of
 * all of them by sort=name pages of 1000, each by a fresh service, and their peak RSS; CPU profiles of
 * every load (`node --cpu-prof`, as --only profiles) and PostgreSQL's plans of them; and the upgrade of a store of release 1.7.0
 * (schema version 7) with as many plants: the start that migrates it, each migration's time, and
 * PostgreSQL's background build of the trigram index. With --baseline-dist, the release build's
 * service is measured on stores of its own next to this one's. BENCH_QUERY_PHASES=loads,walks,profiles,
 * upgrades runs some of the phases only, BENCH_QUERY_LOADS=name,q some of the loads (and the id page).
 * Each phase's output ends with the machine's load average meanwhile and the run's regime. Figures go
 * to bench/results/query.json, those of a run of some phases to query-<phases>.json.
 */

type QueryLoad = 'id' | 'name' | 'q' | 'count-tag' | 'count-q'
const QUERY_LOADS: readonly QueryLoad[] = ['id', 'name', 'q', 'count-tag', 'count-q']
const PHASES = ['loads', 'walks', 'profiles', 'upgrades'] as const
type Phase = typeof PHASES[number]

const BASELINE = 'baseline'
const PAGE = 100
const WALK_PAGE = 1000
const SHORT_WALK = 10_000
/** Paths a load walks: more than a measurement's requests, so that a path is seldom read twice in a measurement. */
const PATHS_PER_LOAD = 40_000
/** Search terms of the q load, and their matches. */
const SEARCH_TERMS = 4000
const SEARCH_MATCHES = [10, 5000] as const
/** Terms of the count-q load: about 10,000 matches at a million plants (scaled with the store). */
const COUNTED_TERMS = 50
const COUNTED_MATCHES = 10_000
const WARM_UP_SECONDS = 1
/** How long a start that migrates a store, or a build of the trigram index, may take. */
const UPGRADE_TIMEOUT_MS = 30 * 60_000

/** The issue's goals: the ratio (reference CPU ÷ this CPU) each load must reach, and its reference. */
const GOALS: Record<QueryLoad, { readonly against: 'baseline' | 'id', readonly sqlite: number, readonly postgres: number }> = {
  id: { against: 'baseline', sqlite: 0.7, postgres: 0.4 },
  name: { against: 'id', sqlite: 0.8, postgres: 0.8 },
  q: { against: 'id', sqlite: 0.3, postgres: 0.3 },
  'count-tag': { against: 'id', sqlite: 0.2, postgres: 0.2 },
  'count-q': { against: 'id', sqlite: 0.2, postgres: 0.2 }
}

type Backend = 'sqlite' | 'postgres'

/** A store of the catalog's plants and the service measured on it. */
interface Measured {
  readonly target: Target
  readonly backend: Backend
  /** This build, or the release --baseline-dist names. */
  readonly release: boolean
  readonly databaseUrl: string
  readonly root: string
}

interface Workload {
  readonly paths: Record<QueryLoad, string[]>
  readonly headers: Record<QueryLoad, Record<string, string>>
  /** What X-Total-Count must say, by path, for the counted loads. */
  readonly counts: Map<string, number>
  readonly terms: { readonly searched: number[], readonly counted: number[] }
}

export const queryPart: Part = {
  name: 'query',
  owns: () => false,
  rounds: (harness) => harness.roundsOf(PAIRED_ROUNDS),
  async compare (harness) {
    const size = Number(process.env.BENCH_QUERY_PLANTS ?? (harness.quick ? 100_000 : 1_000_000))
    const phases = new Set((process.env.BENCH_QUERY_PHASES ?? PHASES.join(',')).split(',').map((phase) => phase.trim()) as Phase[])
    const unknownPhase = [...phases].find((phase) => !PHASES.includes(phase))
    if (unknownPhase !== undefined) throw new Error(`BENCH_QUERY_PHASES takes some of ${PHASES.join(', ')}; got ${JSON.stringify(unknownPhase)}`)
    const results: Record<string, unknown> = { plants: size }
    const load = new LoadAverages()
    /** Ends a phase: its load average and the run's regime, after its table. */
    const endPhase = async (phase: Phase) => {
      const seen = load.end()
      ;(results.loadAverages as Record<string, unknown>)[phase] = seen
      process.stdout.write(`load average (1 min) during ${phase}: ${seen.min}–${seen.max}, median ${seen.median}, on ${cpus().length} CPUs\n`)
      process.stdout.write(regimeLine(await harness.regime()))
    }
    results.loadAverages = {}
    if (phases.has('loads') || phases.has('walks') || phases.has('profiles')) {
      const started = performance.now()
      const index = new CatalogIndex(size)
      checkFoldedWords(Array.from({ length: Math.min(size, 100_000) }, (_, at) => at + 1))
      const workload = makeWorkload(index)
      process.stderr.write(`query: ${size} plants; ${workload.terms.searched.length} search terms (matches ${spread(workload.terms.searched)}), ` +
        `${workload.terms.counted.length} counted terms (matches ${spread(workload.terms.counted)}), in ${seconds(started)} s\n`)
      results.searchTerms = { count: workload.terms.searched.length, matches: quartiles(workload.terms.searched) }
      results.countedTerms = { count: workload.terms.counted.length, matches: quartiles(workload.terms.counted) }
      const stores = await loadStores(harness, size)
      try {
        if (phases.has('loads')) {
          load.start()
          results.loads = await measureLoads(harness, stores, workload, size)
          await endPhase('loads')
        }
        const current = stores.filter((store) => !store.release)
        for (const store of stores) await harness.servers.stop(store.target)
        if (phases.has('walks')) {
          load.start()
          results.walks = await measureWalks(harness, current, size)
          await endPhase('walks')
        }
        if (phases.has('profiles')) {
          load.start()
          results.profiles = await profileLoads(harness, current, workload, size)
          await endPhase('profiles')
        }
      } finally {
        for (const store of stores) await harness.servers.stop(store.target)
      }
    }
    if (phases.has('upgrades')) {
      load.start()
      results.upgrades = await measureUpgrades(harness, size)
      await endPhase('upgrades')
    }
    // A run of some phases only does not replace the figures of a whole run: query-<phases>.json.
    const partial = PHASES.some((phase) => !phases.has(phase)) ? `-${PHASES.filter((phase) => phases.has(phase)).join('-')}` : ''
    const written = writeResultsFile(harness.quick ? `query${partial}-quick.json` : `query${partial}.json`,
      asJson({ machine: { ...harness.machine(), rounds: harness.roundsOf(PAIRED_ROUNDS), loadAverages: loadavg().map((load) => Number(load.toFixed(2))) }, ...results }))
    process.stdout.write(`\nwrote ${written}\n`)
    return []
  }
}

/** The machine's 1-minute load average, read every 5 s during a phase: what else ran meanwhile (the machine is shared). */
export class LoadAverages {
  #samples: number[] = []
  #timer: NodeJS.Timeout | undefined

  start (): void {
    this.#samples = [loadavg()[0] as number]
    this.#timer = setInterval(() => { this.#samples.push(loadavg()[0] as number) }, 5000)
  }

  end (): { min: number, median: number, max: number } {
    clearInterval(this.#timer)
    this.#samples.push(loadavg()[0] as number)
    const round = (value: number) => Number(value.toFixed(2))
    return { min: round(Math.min(...this.#samples)), median: round(median(this.#samples)), max: round(Math.max(...this.#samples)) }
  }
}

const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1)
const randomInt = (below: number) => Math.floor(Math.random() * below)

function quartiles (values: readonly number[]) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (share: number) => sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))] ?? 0
  return { min: at(0), p25: at(0.25), median: at(0.5), p75: at(0.75), max: sorted.at(-1) ?? 0 }
}

function spread (values: readonly number[]): string {
  const { min, median: middle, max } = quartiles(values)
  return `${min}–${max}, median ${middle}`
}

function shuffled<T> (items: T[]): T[] {
  for (let index = items.length - 1; index > 0; index--) {
    const other = randomInt(index + 1)
    ;[items[index], items[other]] = [items[other] as T, items[index] as T]
  }
  return items
}

/** The paths of every load, and what their counts must be. */
function makeWorkload (index: CatalogIndex): Workload {
  const size = index.size
  const searched = searchTerms(index, SEARCH_TERMS, SEARCH_MATCHES[0], SEARCH_MATCHES[1])
  const countedTarget = Math.max(100, Math.round(COUNTED_MATCHES * size / 1_000_000))
  const counted = searchTerms(index, COUNTED_TERMS, Math.round(countedTarget * 0.85), Math.round(countedTarget * 1.15))
  if (searched.size < 100 || counted.size < 5) throw new Error(`too few search terms: ${searched.size} searched, ${counted.size} counted`)
  const searchedTerms = [...searched.keys()]
  const countedTerms = [...counted.keys()]
  const counts = new Map<string, number>()
  const paths = (make: () => string) => shuffled(Array.from({ length: PATHS_PER_LOAD }, make))
  const q = (term: string) => `&q=${encodeURIComponent(term)}`
  return {
    paths: {
      id: paths(() => `/plants?limit=${PAGE}&after=${randomInt(size - PAGE)}`),
      name: paths(() => {
        const id = 1 + randomInt(size)
        return `/plants?limit=${PAGE}&sort=name&cursor=${encodePageCursor({ sort: 'name' }, { name: nameOf(id), id: BigInt(id) })}`
      }),
      // One shuffled order of the distinct terms, repeated: two requests for one term are a whole list of terms apart.
      q: (() => {
        const order = shuffled(searchedTerms.map((term) => `/plants?limit=${PAGE}${q(term)}`))
        return Array.from({ length: Math.max(order.length, PATHS_PER_LOAD) }, (_, at) => order[at % order.length] as string)
      })(),
      'count-tag': paths(() => {
        const path = `/plants?limit=${PAGE}&after=${randomInt(size)}&tag=tag-${randomInt(TAGS)}`
        counts.set(path, Math.floor(size / TAGS))
        return path
      }),
      'count-q': paths(() => {
        const term = countedTerms[randomInt(countedTerms.length)] as string
        const path = `/plants?limit=${PAGE}&after=${randomInt(size)}${q(term)}`
        counts.set(path, counted.get(term) as number)
        return path
      })
    },
    headers: { id: {}, name: {}, q: {}, 'count-tag': { prefer: 'count=exact' }, 'count-q': { prefer: 'count=exact' } },
    counts,
    terms: { searched: [...searched.values()], counted: [...counted.values()] }
  }
}

// ---- Stores ----

/** A service of the build in `root` started on an empty store and stopped again: the store is at that build's schema. */
async function migrateEmpty (harness: Harness, name: string, databaseUrl: string, root: string): Promise<void> {
  const service = await harness.servers.startService(`${name}-migrate`, databaseUrl, {}, root)
  await harness.servers.stop(service)
}

/** A SQLite store of the catalog's plants at the schema of the build in `root`, its search index rebuilt. */
async function loadSqlite (harness: Harness, name: string, size: number, root: string): Promise<string> {
  const file = join(harness.workFolder, `${name}.db`)
  const databaseUrl = `sqlite:${file}`
  await migrateEmpty(harness, name, databaseUrl, root)
  const db = new Database(file)
  db.pragma('synchronous = OFF')
  const insert = db.prepare('INSERT INTO plants (id, name, tag, name_folded) VALUES (?, ?, ?, ?)')
  const insertBatch = db.transaction((rows: ReturnType<typeof catalogBatches> extends Generator<infer R> ? R : never) => {
    for (let at = 0; at < rows.ids.length; at++) insert.run(rows.ids[at], rows.names[at], rows.tags[at], rows.folded[at])
  })
  for (const rows of catalogBatches(size, 50_000)) insertBatch(rows)
  // The triggers noted every plant for the writer to index: the index is built whole instead, as migration 10 builds it.
  db.exec("INSERT INTO plant_name_search (plant_name_search) VALUES ('rebuild')")
  db.exec('DELETE FROM plant_search_pending')
  db.pragma('wal_checkpoint(TRUNCATE)')
  db.close()
  return databaseUrl
}

/** A PostgreSQL store of the catalog's plants at the schema of the build in `root`, without its trigram index (the service builds it). */
async function loadPostgres (harness: Harness, name: string, size: number, root: string): Promise<string> {
  const databaseUrl = await harness.postgresDatabase()
  await migrateEmpty(harness, name, databaseUrl, root)
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    // Built on the empty table by that start: dropped, so that the load does not update it row by row.
    await client.query('DROP INDEX IF EXISTS plants_name_trigrams')
    for (const rows of catalogBatches(size, 50_000)) {
      await client.query('INSERT INTO plants (id, name, tag, name_folded) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])',
        [rows.ids, rows.names, rows.tags, rows.folded])
    }
  } finally {
    await client.end()
  }
  return databaseUrl
}

/** Waits for the service to have built plants_name_trigrams (valid), then VACUUM ANALYZE: the store as a settled one is. */
async function settlePostgres (databaseUrl: string): Promise<number> {
  const started = performance.now()
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    for (;;) {
      const { rows } = await client.query<{ valid: boolean }>(
        "SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'plants_name_trigrams'")
      if (rows[0]?.valid === true) break
      if (performance.now() - started > UPGRADE_TIMEOUT_MS) throw new Error('plants_name_trigrams was not built in time')
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    const built = (performance.now() - started) / 1000
    await client.query('VACUUM ANALYZE plants')
    return built
  } finally {
    await client.end()
  }
}

/** The stores and their services: SQLite and PostgreSQL of this build, and of the release build when --baseline-dist names one. */
async function loadStores (harness: Harness, size: number): Promise<Measured[]> {
  const builds = [{ release: false, root: ROOT }, ...(harness.releaseRoot === undefined ? [] : [{ release: true, root: harness.releaseRoot }])]
  const stores: Measured[] = []
  for (const { release, root } of builds) {
    for (const backend of ['sqlite', 'postgres'] as const) {
      const name = `${backend}${release ? '-release' : ''}`
      const started = performance.now()
      const databaseUrl = backend === 'sqlite' ? await loadSqlite(harness, name, size, root) : await loadPostgres(harness, name, size, root)
      const loaded = seconds(started)
      const target = await harness.servers.startService(name, databaseUrl, {}, root)
      const trigrams = backend === 'postgres' ? `, trigram index built by the service in ${(await settlePostgres(databaseUrl)).toFixed(1)} s` : ''
      process.stderr.write(`query: ${name} loaded with ${size} plants in ${loaded} s${trigrams}\n`)
      stores.push({ target, backend, release, databaseUrl, root })
    }
  }
  return stores
}

// ---- Loads ----

/** Checks a few paths of each load on a target: 200, plants that fit, and the count the catalog says. */
async function checkAnswers (target: Target, workload: Workload, loads: readonly QueryLoad[]): Promise<void> {
  for (const load of loads) {
    for (const path of workload.paths[load].slice(0, 5)) {
      const response = await fetch(`${target.url}${path}`, { headers: { authorization: `Bearer ${target.token}`, ...workload.headers[load] } })
      const body = await response.text()
      if (response.status !== 200) throw new Error(`${target.name} ${path}: ${response.status} ${body}`)
      const plants = JSON.parse(body) as Array<{ id: number, name: string, tag?: string }>
      const expected = workload.counts.get(path)
      if (expected !== undefined && response.headers.get('x-total-count') !== String(expected)) {
        throw new Error(`${target.name} ${path}: counted ${response.headers.get('x-total-count')}, the catalog says ${expected}`)
      }
      const wrong = plants.find((plant) => plant.name !== nameOf(plant.id) || plant.tag !== tagOf(plant.id))
      if (wrong !== undefined) throw new Error(`${target.name} ${path}: ${JSON.stringify(wrong)} is not the catalog's plant`)
      const term = new URLSearchParams(path.split('?')[1]).get('q')
      const unmatched = term === null ? undefined : plants.find((plant) => !foldName(plant.name).includes(term))
      if (unmatched !== undefined) throw new Error(`${target.name} ${path}: ${JSON.stringify(unmatched)} does not hold the search`)
      if (plants.length === 0 && load !== 'count-q' && load !== 'count-tag') throw new Error(`${target.name} ${path}: an empty page`)
    }
  }
}

interface QueryRow extends Summary {
  readonly target: string
  readonly load: QueryLoad
  /** The row it is compared with, `target/load`. */
  readonly against: string
  /** This CPU ÷ the reference's (the project's cpuRatio: below 1 costs less), median of the rounds' ratios. */
  readonly cpuRatio: number
  /** The reference's CPU ÷ this (the issue's goals: 1 costs the same, higher is cheaper), median of the rounds'. */
  readonly speed: number
  readonly speedRange: string
  /** Likewise with the database's CPU added to each side (PostgreSQL). */
  readonly speedWithDatabase?: number
  readonly goal?: number
  readonly met?: boolean
}

async function measureLoads (harness: Harness, stores: readonly Measured[], workload: Workload, size: number) {
  const rounds = harness.roundsOf(PAIRED_ROUNDS)
  // BENCH_QUERY_LOADS=name,q, say: those and the id page they are compared with.
  const chosen = (process.env.BENCH_QUERY_LOADS ?? QUERY_LOADS.join(',')).split(',').map((load) => load.trim())
  const unknown = chosen.find((load) => !(QUERY_LOADS as readonly string[]).includes(load))
  if (unknown !== undefined) throw new Error(`BENCH_QUERY_LOADS takes some of ${QUERY_LOADS.join(', ')}; got ${JSON.stringify(unknown)}`)
  const loads = QUERY_LOADS.filter((load) => load === 'id' || chosen.includes(load))
  const baseline = await harness.servers.startBaseline(BASELINE, { plants: size })
  try {
    await checkAnswers(baseline, workload, ['id'])
    for (const store of stores) await checkAnswers(store.target, workload, loads)
    const plan: Array<{ target: Target, load: QueryLoad }> = []
    for (const load of loads) {
      if (load === 'id') plan.push({ target: baseline, load })
      for (const store of stores) plan.push({ target: store.target, load })
    }
    for (const { target, load } of plan) {
      await harness.measurePaths(target, workload.paths[load], WARM_UP_SECONDS, workload.headers[load])
      await harness.settle(target)
    }
    const samples: Samples = new Map()
    for (let round = 1; round <= rounds; round++) {
      for (const { target, load } of round % 2 === 1 ? plan : [...plan].reverse()) {
        const sample = await harness.measurePaths(target, workload.paths[load], harness.durationSeconds, workload.headers[load])
        // What this measurement left in flight is not the next one's to pay for.
        await harness.settle(target)
        const key = `${target.name}/${load}`
        record(samples, key, sample)
        harness.logSample(round, key, sample)
      }
    }
    const rows = [{ target: baseline.name, load: 'id' as const }, ...stores.flatMap((store) => loads.map((load) => ({ target: store.target.name, load })))]
      .map(({ target, load }) => queryRow(samples, target, load, stores.find((store) => store.target.name === target)?.backend))
    const releaseRows = stores.filter((store) => store.release).flatMap((release) => {
      const current = stores.find((store) => !store.release && store.backend === release.backend) as Measured
      return loads.map((load) => {
        const key = `${current.target.name}/${load}`
        const releaseKey = `${release.target.name}/${load}`
        return {
          target: current.target.name,
          load,
          against: releaseKey,
          speed: Number(median(roundRatios(samples, releaseKey, key, 'serverCpuUs')).toFixed(3)),
          speedRange: ratioRange(roundRatios(samples, releaseKey, key, 'serverCpuUs')),
          speedWithDatabase: Number(median(withDatabaseRatios(samples, releaseKey, key)).toFixed(3))
        }
      })
    })
    printLoads(harness, rounds, rows, releaseRows)
    return { rows, thisBuildAgainstRelease: releaseRows }
  } finally {
    await harness.servers.stop(baseline)
  }
}

/** Per round: (reference server + database CPU) ÷ (this server + database CPU). */
function withDatabaseRatios (samples: Samples, referenceKey: string, key: string): number[] {
  const reference = samples.get(referenceKey) ?? []
  return (samples.get(key) ?? []).map((sample, round) =>
    ((reference[round]?.serverCpuUs ?? NaN) + (reference[round]?.databaseCpuUs ?? NaN)) / (sample.serverCpuUs + sample.databaseCpuUs))
}

function queryRow (samples: Samples, target: string, load: QueryLoad, backend: Backend | undefined): QueryRow {
  const key = `${target}/${load}`
  const summary = summarize(samples.get(key) ?? [], 1)
  if (backend === undefined) return { target, load, ...summary, against: key, cpuRatio: 1, speed: 1, speedRange: '' }
  const goal = GOALS[load]
  const against = goal.against === 'baseline' ? `${BASELINE}/id` : `${target}/id`
  const speeds = roundRatios(samples, against, key, 'serverCpuUs')
  const speed = Number(median(speeds).toFixed(3))
  return {
    target,
    load,
    ...summary,
    against,
    cpuRatio: Number(median(roundRatios(samples, key, against, 'serverCpuUs')).toFixed(3)),
    speed,
    speedRange: ratioRange(speeds),
    ...(backend === 'postgres' ? { speedWithDatabase: Number(median(withDatabaseRatios(samples, against, key)).toFixed(3)) } : {}),
    goal: goal[backend],
    met: speed >= goal[backend]
  }
}

function printLoads (harness: Harness, rounds: number, rows: readonly QueryRow[], releaseRows: ReadonlyArray<{ target: string, load: string, against: string, speed: number, speedRange: string, speedWithDatabase: number }>): void {
  process.stdout.write(`\nquery loads, ${describeRounds(rounds, harness.durationSeconds)}, 50 connections, every request another page; ` +
    '× against = its CPU per request ÷ this one\'s (the goals\' ratio: 1 costs the same, above 1 less); CPU ÷ against = the inverse\n')
  const header = ['target', 'load', 'req/s', 'p99 ms', 'server µs/req', 'db µs/req', 'against', 'CPU ÷ against', '× against', 'rounds', 'goal',
    '× with db', 'peak RSS MB', 'errors', `${harness.generator.name} CPU`]
  const lines = rows.map((row) => [row.target, row.load, String(row.rps), String(row.p99), row.serverCpuUs.toFixed(1),
    row.databaseCpuUs === 0 ? '' : String(row.databaseCpuUs), row.against === `${row.target}/${row.load}` ? '' : row.against,
    row.goal === undefined ? '' : row.cpuRatio.toFixed(2), row.goal === undefined ? '' : row.speed.toFixed(2), row.speedRange,
    row.goal === undefined ? '' : `≥ ${row.goal} ${row.met === true ? 'met' : 'MISSED'}`,
    row.speedWithDatabase === undefined ? '' : row.speedWithDatabase.toFixed(2), String(row.rssMb), String(row.errors),
    generatorCell(row.generatorCpuShare, row.valid)])
  process.stdout.write(`${formatTable(header, lines, 3)}\n`)
  if (releaseRows.length > 0) {
    process.stdout.write('\nthis build against the release (--baseline-dist): the release\'s CPU per request ÷ this build\'s\n')
    process.stdout.write(`${formatTable(['target', 'load', 'release CPU ÷ this', 'rounds', 'with db'], releaseRows.map((row) =>
      [row.target, row.load, row.speed.toFixed(2), row.speedRange, row.speedWithDatabase.toFixed(2)]), 2)}\n`)
  }
}

// ---- Walks ----

/** Walks by sort=name pages of WALK_PAGE from the start, following the Link header, until `plants` were read or none are left. */
async function walkByName (target: Target, plants: number): Promise<{ plants: number, pages: number, seconds: number, peakRssMbAfter: Record<string, number> }> {
  const started = performance.now()
  // The peak so far once a tenth, a half and all of the plants were read: whether it levels off, or keeps growing.
  const checkpoints = [...new Set([SHORT_WALK, Math.round(plants / 10), Math.round(plants / 2), plants])].filter((count) => count <= plants).sort((a, b) => a - b)
  const peakRssMbAfter: Record<string, number> = {}
  let path: string | undefined = `/plants?limit=${WALK_PAGE}&sort=name`
  let read = 0
  let pages = 0
  let last: { name: string, id: number } | undefined
  while (path !== undefined && read < plants) {
    const response: Response = await fetch(`${target.url}${path}`, { headers: { authorization: `Bearer ${target.token}` } })
    if (response.status !== 200) throw new Error(`${target.name} ${path}: ${response.status} ${await response.text()}`)
    const page = await response.json() as Array<{ id: number, name: string }>
    for (const plant of page) {
      if (last !== undefined && (compareNames(last.name, plant.name) > 0 || (last.name === plant.name && last.id >= plant.id))) {
        throw new Error(`${target.name}: ${JSON.stringify(plant)} came after ${JSON.stringify(last)}`)
      }
      last = plant
    }
    read += page.length
    pages++
    while (checkpoints[0] !== undefined && read >= checkpoints[0]) peakRssMbAfter[String(checkpoints.shift())] = Math.round(peakRssMb(serverPid(target) as number))
    path = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
  }
  return { plants: read, pages, seconds: (performance.now() - started) / 1000, peakRssMbAfter }
}

/** The peak resident set of a process so far (VmHWM), in MB. */
function peakRssMb (pid: number): number {
  return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024
}

async function measureWalks (harness: Harness, stores: readonly Measured[], size: number) {
  const walks = []
  for (const store of stores) {
    const walked = []
    for (const plants of [SHORT_WALK, size]) {
      const target = await harness.servers.startService(`${store.backend}-walk-${plants}`, store.databaseUrl)
      try {
        const walk = await walkByName(target, plants)
        if (walk.plants !== plants) throw new Error(`${target.name}: the walk read ${walk.plants} plants, not ${plants}`)
        walked.push({ ...walk, peakRssMb: Math.round(peakRssMb(serverPid(target) as number)) })
      } finally {
        await harness.servers.stop(target)
      }
      process.stderr.write(`query: ${store.backend} walked ${plants} plants by name\n`)
    }
    const [short, whole] = walked as [typeof walked[0], typeof walked[0]]
    walks.push({ backend: store.backend, short, whole, growthMb: whole.peakRssMb - short.peakRssMb, met: whole.peakRssMb - short.peakRssMb <= 10 })
  }
  process.stdout.write(`\nwalks by sort=name pages of ${WALK_PAGE} (one client, a fresh service each), peak RSS (VmHWM): goal within 10 MB\n`)
  process.stdout.write(`${formatTable(['backend', 'plants', 'pages', 's', 'plants/s', 'peak RSS MB', 'peak RSS MB after plants', `${size} ÷ ${SHORT_WALK}`],
    walks.flatMap((walk) => [walk.short, walk.whole].map((run, at) => [walk.backend, String(run.plants), String(run.pages), run.seconds.toFixed(1),
      String(Math.round(run.plants / run.seconds)), String(run.peakRssMb),
      Object.entries(run.peakRssMbAfter).map(([count, mb]) => `${count}: ${mb}`).join(', '),
      at === 0 ? '' : `${walk.growthMb >= 0 ? '+' : ''}${walk.growthMb} MB ${walk.met ? 'met' : 'MISSED'}`])), 1)}\n`)
  return walks
}

// ---- Profiles ----

type ProfiledLoad = Profiled<QueryLoad>

/**
 * Every load under `node --cpu-prof`, as --only profiles does it: the baseline (its id page) and each
 * store's service, one process each, one measurement of each load after a warm-up; the profile's samples
 * stamped inside a measurement are that load's. µs per request by place and by function, scaled to the
 * main thread's CPU; worker threads' by their sampling interval. Each load is set against what its goal
 * compares it with: the id page against the baseline's, the others against the same service's id page.
 * Then PostgreSQL's side: the plans of each load's first path.
 */
async function profileLoads (harness: Harness, stores: readonly Measured[], workload: Workload, size: number) {
  const profiled: ProfiledLoad[] = []
  for (const name of [BASELINE, ...stores.map((store) => store.backend)]) {
    const folder = join(harness.workFolder, 'query-profiles', name)
    mkdirSync(folder, { recursive: true })
    const flags = ['--cpu-prof', `--cpu-prof-dir=${folder}`]
    const store = stores.find((candidate) => candidate.backend === name)
    const target = store === undefined
      ? await harness.servers.startBaseline(`${name}-profiled`, { extraNodeFlags: flags, plants: size })
      : await harness.servers.startService(`${name}-profiled`, store.databaseUrl, {}, ROOT, flags)
    const windows: Array<ProfileWindow & { load: QueryLoad }> = []
    try {
      const loads = store === undefined ? ['id' as const] : QUERY_LOADS
      // Every load once before any is measured: the first in a fresh process would carry the compiler's threads.
      for (const load of loads) {
        await harness.measurePaths(target, workload.paths[load], WARM_UP_SECONDS, workload.headers[load])
        await harness.settle(target)
      }
      for (const load of loads) {
        const measured = await measureWindow(target, () => harness.measurePaths(target, workload.paths[load], harness.durationSeconds, workload.headers[load]))
        await harness.settle(target)
        windows.push({ load, ...measured })
      }
    } finally {
      await harness.servers.stop(target)
    }
    const { main, workers } = readProfiles(folder)
    if (main === undefined) throw new Error(`${name} wrote no CPU profile`)
    for (const measured of windows) {
      const time = selfTimeIn(main, measured.window, ROOT)
      profiled.push({
        target: name,
        load: measured.load,
        requests: measured.requests,
        mainCpuUs: round(measured.mainCpuUs),
        otherThreadsCpuUs: round(measured.otherThreadsCpuUs),
        databaseCpuUs: round(measured.databaseCpuUs),
        byPlace: scaled(time, 'byPlace', measured.mainCpuUs),
        byFunction: scaled(time, 'byFunction', measured.mainCpuUs),
        workerByFunction: scaledByInterval(workers.map((profile) => selfTimeIn(profile, measured.window, ROOT)), measured)
      })
    }
  }
  for (const service of profiled.filter((profile) => profile.target !== BASELINE)) {
    const reference = profiled.find((profile) => service.load === 'id'
      ? profile.target === BASELINE
      : profile.target === service.target && profile.load === 'id') as ProfiledLoad
    process.stdout.write(`\n${service.target} ${service.load} (profiled): main thread ${service.mainCpuUs} µs/req against ${reference.target} ${reference.load}'s ` +
      `${reference.mainCpuUs}; other threads ${service.otherThreadsCpuUs} against ${reference.otherThreadsCpuUs}` +
      `${service.databaseCpuUs > 0 ? `; PostgreSQL ${service.databaseCpuUs} against ${reference.databaseCpuUs}` : ''}\n`)
    process.stdout.write(`${differenceTable('place', service.byPlace, reference.byPlace, 12)}\n`)
    process.stdout.write(`${differenceTable('function', service.byFunction, reference.byFunction, 12)}\n`)
    const worker = Object.entries(service.workerByFunction).sort(([, a], [, b]) => b - a).slice(0, 8)
    if (worker.length > 0) process.stdout.write(`${formatTable(['worker thread function', 'µs/req'], worker.map(([key, us]) => [key, us.toFixed(1)]), 1)}\n`)
  }
  // The largest functions only: the whole profiles are in the run's work folder while it runs.
  const top = (entries: Record<string, number>) => Object.fromEntries(Object.entries(entries).sort(([, a], [, b]) => b - a).slice(0, 40))
  const postgres = stores.find((store) => store.backend === 'postgres')
  const plans = postgres === undefined ? undefined : await explainLoads(postgres.databaseUrl, workload)
  return {
    byTarget: profiled.map((profile) => ({ ...profile, byFunction: top(profile.byFunction), workerByFunction: top(profile.workerByFunction) })),
    ...(plans === undefined ? {} : { postgresPlans: plans })
  }
}

const round = (value: number) => Number(value.toFixed(2))

function scaled (time: SelfTime, by: 'byFunction' | 'byPlace', cpuUs: number): Record<string, number> {
  const busy = time.samples - (time.byPlace.get(IDLE) ?? 0)
  const result: Record<string, number> = {}
  for (const [key, samples] of time[by]) if (key !== IDLE) result[key] = round(samples / busy * cpuUs)
  return result
}

/**
 * PostgreSQL's side of each load: the plans of the service's statements (plant-pages.ts) for the load's
 * first path (the page's, and the count's where it counts), by EXPLAIN (ANALYZE, BUFFERS) after a run of
 * each; their lines, by load.
 */
async function explainLoads (databaseUrl: string, workload: Workload): Promise<Record<string, string[][]>> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const plans: Record<string, string[][]> = {}
    for (const load of QUERY_LOADS) {
      const path = workload.paths[load][0] as string
      const query = Object.fromEntries(new URLSearchParams(path.split('?')[1])) as PlantListQuery
      const listing = listingOf(query, workload.headers[load].prefer === 'count=exact')
      const statements = [pageStatement(listing.page), ...(listing.counted ? [countStatement(listing.page)] : [])]
      plans[load] = []
      for (const { statement, values } of statements) {
        await client.query(statement.text, values)
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${statement.text}`, values)
        plans[load].push(rows.map((row) => row['QUERY PLAN']))
      }
      process.stdout.write(`\nPostgreSQL's plans of ${load} (EXPLAIN ANALYZE of ${path}):\n` +
        `${plans[load].map((lines) => lines.map((line) => `  ${line}`).join('\n')).join('\n\n')}\n`)
    }
    return plans
  } finally {
    await client.end()
  }
}
