import { join } from 'node:path'
import pg from 'pg'
import { median, record, roundRatios, summarize, type Samples, type Summary } from '../figures.js'
import { PAIRED_ROUNDS, type Harness } from '../harness.js'
import { preloadedTagOf } from '../load-generator.js'
import type { Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'
import { fixed } from './changes-helpers.js'
import { ENGINES, type Engine } from './changes-writes.js'

/**
 * The changes part's feed phase: a page of 100 changes against a page of 100 plants. On SQLite and
 * PostgreSQL, a store written by `POST /plants/batch` (the plants 1 to N, 1000 a batch: N plants and N
 * changes, 200,000 unless BENCH_CHANGES_FEED=N), 50 connections, every request another page: the feed
 * after a random `seq`, and the plants after a random id (load-generator.ts's paths load). Interleaved
 * rounds, each measurement once the one before has settled; the ratio is the median of the rounds' own
 * ratios of server CPU per request (and with the database's, for PostgreSQL).
 */

export const PAGE = 100
export const FEED_GOAL = 1.5
const BATCH = 1000
const BATCHES_IN_FLIGHT = 4
const PATHS_PER_LOAD = 40_000
const FEED_LOADS = ['feed', 'list'] as const
type FeedLoad = typeof FEED_LOADS[number]

export interface FeedStore {
  readonly engine: Engine
  readonly databaseUrl: string
  /** The greatest seq of the store's changes, and how many plants it holds. */
  readonly head: number
  readonly plants: number
}

export interface FeedRow extends Summary {
  readonly engine: Engine
  readonly load: FeedLoad
}

export interface FeedComparison {
  readonly engine: Engine
  readonly ratio: number
  readonly range: string
  readonly withDatabase?: number
  readonly goal: number
  readonly met: boolean
}

const randomInt = (below: number) => Math.floor(Math.random() * below)

/** Writes the plants 1 to `size` through batches of creates: as many changes. */
async function fill (target: Target, size: number): Promise<void> {
  let next = 1
  const worker = async () => {
    while (next <= size) {
      const first = next
      next += BATCH
      const operations = []
      for (let id = first; id < first + BATCH && id <= size; id++) {
        operations.push(`{"method":"POST","body":{"id":${id},"name":"plant ${id}","tag":"${preloadedTagOf(id)}"}}`)
      }
      const response = await fetch(`${target.url}/plants/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
        body: `{"operations":[${operations.join(',')}]}`
      })
      if (response.status !== 200) throw new Error(`${target.name}: a batch answered ${response.status}: ${(await response.text()).slice(0, 500)}`)
      await response.arrayBuffer()
    }
  }
  await Promise.all(Array.from({ length: BATCHES_IN_FLIGHT }, worker))
}

/** A store of each engine with `size` plants and their changes, written by this build's service (stopped again). */
export async function loadFeedStores (harness: Harness, size: number): Promise<FeedStore[]> {
  const stores: FeedStore[] = []
  for (const engine of ENGINES) {
    const started = performance.now()
    const databaseUrl = engine === 'sqlite' ? `sqlite:${join(harness.workFolder, 'feed.db')}` : await harness.postgresDatabase()
    const target = await harness.servers.startService(`${engine}-feed-fill`, databaseUrl)
    try {
      await fill(target, size)
      const response = await fetch(`${target.url}/plants/changes/head`, { headers: { authorization: `Bearer ${target.token}` } })
      const head = Number((await response.json() as { seq: number }).seq)
      if (head < size) throw new Error(`${target.name}: the head is ${head} after ${size} creates`)
      stores.push({ engine, databaseUrl, head, plants: size })
    } finally {
      await harness.servers.stop(target)
    }
    if (engine === 'postgres') {
      const client = new pg.Client({ connectionString: databaseUrl })
      await client.connect()
      await client.query('VACUUM ANALYZE plants')
      await client.query('VACUUM ANALYZE plant_changes')
      await client.end()
    }
    process.stderr.write(`changes feed: ${engine} store of ${size} plants and changes written in ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
  }
  return stores
}

/** Each load's paths: pages at random points of the store, shuffled. */
export function feedPaths (store: FeedStore): Record<FeedLoad, string[]> {
  return {
    feed: Array.from({ length: PATHS_PER_LOAD }, () => `/plants/changes?after=${randomInt(store.head - PAGE)}&limit=${PAGE}`),
    list: Array.from({ length: PATHS_PER_LOAD }, () => `/plants?limit=${PAGE}&after=${randomInt(store.plants - PAGE)}`)
  }
}

/** A few pages of each load: 200 and full. */
async function checkPages (target: Target, paths: Record<FeedLoad, string[]>): Promise<void> {
  for (const load of FEED_LOADS) {
    for (const path of paths[load].slice(0, 5)) {
      const response = await fetch(`${target.url}${path}`, { headers: { authorization: `Bearer ${target.token}` } })
      const body = await response.text()
      if (response.status !== 200) throw new Error(`${target.name} ${path}: ${response.status} ${body.slice(0, 300)}`)
      const items = JSON.parse(body) as unknown[]
      if (items.length !== PAGE) throw new Error(`${target.name} ${path}: ${items.length} items, not ${PAGE}`)
    }
  }
}

export async function measureFeed (harness: Harness, stores: readonly FeedStore[]): Promise<{ rows: FeedRow[], comparisons: FeedComparison[] }> {
  const targets: Array<{ store: FeedStore, target: Target, paths: Record<FeedLoad, string[]> }> = []
  try {
    for (const store of stores) {
      const target = await harness.servers.startService(`${store.engine}-feed`, store.databaseUrl)
      const paths = feedPaths(store)
      await checkPages(target, paths)
      targets.push({ store, target, paths })
    }
    const plan = targets.flatMap((entry) => FEED_LOADS.map((load) => ({ ...entry, load })))
    for (const { target, paths, load } of plan) {
      await harness.measurePaths(target, paths[load], 1)
      await harness.settle(target, 5000)
    }
    const samples: Samples = new Map()
    const rounds = harness.roundsOf(PAIRED_ROUNDS)
    for (let round = 1; round <= rounds; round++) {
      for (const { store, target, paths, load } of round % 2 === 1 ? plan : [...plan].reverse()) {
        const sample = await harness.measurePaths(target, paths[load], harness.durationSeconds)
        await harness.settle(target, 5000)
        record(samples, `${store.engine}/${load}`, sample)
        harness.logSample(round, `${store.engine}/${load}`, sample)
      }
    }
    const rows = stores.flatMap((store) => FEED_LOADS.map((load): FeedRow => ({ engine: store.engine, load, ...summarize(samples.get(`${store.engine}/${load}`) ?? [], 1) })))
    const comparisons = stores.map(({ engine }): FeedComparison => {
      const ratios = roundRatios(samples, `${engine}/feed`, `${engine}/list`, 'serverCpuUs')
      const feed = samples.get(`${engine}/feed`) ?? []
      const list = samples.get(`${engine}/list`) ?? []
      const withDatabase = feed.map((sample, round) => (sample.serverCpuUs + sample.databaseCpuUs) / ((list[round]?.serverCpuUs ?? NaN) + (list[round]?.databaseCpuUs ?? NaN)))
      const ratio = fixed(median(ratios), 3)
      return { engine, ratio, range: ratioRange(ratios), ...(engine === 'postgres' ? { withDatabase: fixed(median(withDatabase), 3) } : {}), goal: FEED_GOAL, met: ratio <= FEED_GOAL }
    })
    printFeed(harness, rows, comparisons, rounds, stores[0]?.head ?? 0)
    return { rows, comparisons }
  } finally {
    for (const { target } of targets) await harness.servers.stop(target)
  }
}

function printFeed (harness: Harness, rows: readonly FeedRow[], comparisons: readonly FeedComparison[], rounds: number, size: number): void {
  process.stdout.write(`\nA feed page of ${PAGE} changes at a random seq against a list page of ${PAGE} plants at a random id, stores of ${size} ` +
    `plants and changes, 50 connections; medians of ${describeRounds(rounds, harness.durationSeconds)}, interleaved\n`)
  process.stdout.write(`${formatTable(['engine', 'load', 'req/s', 'p99 ms', 'server µs/req', 'db µs/req', 'errors', `${harness.generator.name} CPU`],
    rows.map((row) => [row.engine, row.load, String(row.rps), String(row.p99), row.serverCpuUs.toFixed(1), row.engine === 'postgres' ? String(row.databaseCpuUs) : '',
      String(row.errors), generatorCell(row.generatorCpuShare, row.valid)]), 2)}\n`)
  process.stdout.write(`${formatTable(['engine', 'feed ÷ list (server CPU)', 'rounds', 'with db', 'goal'], comparisons.map((row) => [row.engine, row.ratio.toFixed(3), row.range,
    row.withDatabase?.toFixed(3) ?? '', `≤ ${row.goal} ${row.met ? 'met' : 'MISSED'}`]), 1)}\n`)
}
