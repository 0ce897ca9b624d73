import { join } from 'node:path'
import pg from 'pg'
import Database from '../../src/store/sqlite/driver.js'
import { median } from '../figures.js'
import type { Harness } from '../harness.js'
import { processCpuSeconds, serverPid, type Target } from '../processes.js'
import { formatTable } from '../report.js'
import type { WriterReport } from '../changes-writer.js'
import { fixed, percentile, scheduledSeconds, sleep, startWriter } from './changes-helpers.js'
import type { Engine } from './changes-writes.js'

/**
 * The changes part's pruning phase: a write's latency under a steady moderate load (500 POST/s, open
 * loop, bench/changes-writer.ts) while the service's own retention loop prunes a million expired changes,
 * against the same load on a store without them. The backlog is written with SQL straight into
 * plant_changes (seq 1 to N, the head moved past them), committed_at set so that it expires about 12 s
 * after the service starts (CHANGES_RETENTION=20s): the writes run steady before the pruning starts. The
 * bench reads the store's pruned-through mark every 100 ms to learn when pruning started and ended; the
 * writes sent in that window are compared with those the run without a backlog sent at the same offsets
 * from its start, and with the same run's writes before the pruning started. Rounds alternate the two.
 */

/** Changes in the backlog: a million unless BENCH_CHANGES_PRUNE=N (100,000 with --quick). */
const RETENTION = '20s'
const RETENTION_MS = 20_000
const WRITES_PER_SECOND = 500
/** The backlog expires this long after it was written (the service starts meanwhile). */
const EXPIRES_IN_MS: Record<Engine, number> = { sqlite: 14_000, postgres: 16_000 }
/** The writes go on this long after the pruning ended. */
const AFTER_PRUNING_MS = 3000
const LONGEST_RUN_S = 400
/** Writes in the first seconds warm the service up: not counted. */
const WARM_UP_MS = 3000

export interface PruneRun {
  readonly engine: Engine
  readonly round: number
  readonly backlog: number
  /** From the writer's start, in s; undefined in the run without a backlog. */
  readonly pruneStartS?: number
  readonly pruneEndS?: number
  readonly prunedPerSecond?: number
  readonly window: { readonly fromS: number, readonly toS: number }
  readonly writesInWindow: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** The same run's writes after the warm-up and before the window. */
  readonly beforeP99Ms: number
  readonly failures: Record<string, number>
  readonly serverCpuShare: number
  /** The share of the run the service's main thread was ready to run but waited for a CPU (the machine is shared). */
  readonly serverWaitingShare: number
  readonly writerCpuShare: number
}

export interface PruneResult {
  readonly engine: Engine
  readonly backlog: number
  readonly runs: PruneRun[]
  readonly p99WithPruningMs: number
  readonly p99WithoutMs: number
  readonly ratio: number
  readonly prunedPerSecond: number
}

/** A migrated store with `backlog` changes expiring in EXPIRES_IN_MS (none when 0): its URL and a reader of its pruned-through mark. */
async function prepareStore (harness: Harness, engine: Engine, name: string, backlog: number): Promise<{ databaseUrl: string, prunedThrough: () => Promise<number>, close: () => Promise<void> }> {
  const databaseUrl = engine === 'sqlite' ? `sqlite:${join(harness.workFolder, `${name}.db`)}` : await harness.postgresDatabase()
  const migrate = await harness.servers.startService(`${name}-migrate`, databaseUrl)
  await harness.servers.stop(migrate)
  const committedAt = Date.now() + EXPIRES_IN_MS[engine] - RETENTION_MS
  if (engine === 'sqlite') {
    const file = databaseUrl.slice('sqlite:'.length)
    if (backlog > 0) {
      const db = new Database(file)
      db.pragma('synchronous = OFF')
      const insert = db.prepare('INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by) VALUES (?, ?, 1, ?, ?, NULL, ?, \'bench\')')
      db.transaction(() => {
        for (let seq = 1; seq <= backlog; seq++) insert.run(seq, 1_000_000_000 + seq, `old ${seq}`, `tag-${seq % 4}`, committedAt)
        db.prepare('UPDATE change_log SET head = ? WHERE singleton = 1').run(backlog)
      })()
      db.pragma('wal_checkpoint(TRUNCATE)')
      db.close()
    }
    const reader = new Database(file, { readonly: true })
    const mark = reader.prepare<[], number>('SELECT pruned_through FROM change_log WHERE singleton = 1').pluck()
    return { databaseUrl, prunedThrough: async () => Number(mark.get()), close: async () => { reader.close() } }
  }
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  if (backlog > 0) {
    await client.query(`INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by)
      SELECT g, 1000000000 + g, 1, 'old ' || g, 'tag-' || (g % 4), NULL, $1, 'bench' FROM generate_series(1, $2::bigint) g`, [committedAt, backlog])
    await client.query('UPDATE change_log_head SET head = $1 WHERE singleton = 1', [backlog])
    await client.query('VACUUM ANALYZE plant_changes')
    // The backlog's WAL written out now: the checkpoint it would set off is not the pruning's to pay for.
    await client.query('CHECKPOINT')
  }
  return {
    databaseUrl,
    prunedThrough: async () => Number((await client.query<{ through: string }>('SELECT through FROM change_log_pruned WHERE singleton = 1')).rows[0]?.through ?? 0),
    close: async () => { await client.end() }
  }
}

/** The writes' latencies sent between `fromS` and `toS` of the run. */
function latenciesBetween (report: WriterReport, fromS: number, toS: number): number[] {
  const latencies: number[] = []
  report.sentAtMs.forEach((sentAt, index) => {
    if (sentAt >= fromS * 1000 && sentAt < toS * 1000) latencies.push(report.latencyMs[index] as number)
  })
  // A write not answered 200 counts as the slowest.
  return latencies.map((latency) => latency < 0 ? Infinity : latency)
}

/**
 * One run: the service on a prepared store, the writer until the pruning has ended and 3 s more (with
 * a backlog), or for `seconds` (without).
 */
async function run (harness: Harness, engine: Engine, round: number, backlog: number, seconds?: number, window?: { fromS: number, toS: number }): Promise<PruneRun> {
  const name = `${engine}-prune-${backlog > 0 ? 'backlog' : 'none'}-${round}`
  const store = await prepareStore(harness, engine, name, backlog)
  let target: Target | undefined
  try {
    target = await harness.servers.startService(name, store.databaseUrl, { CHANGES_RETENTION: RETENTION })
    const pid = serverPid(target) as number
    const cpuBefore = processCpuSeconds(pid)
    const waitingBefore = scheduledSeconds(pid).waiting
    const started = performance.now()
    const writer = startWriter(harness, { url: target.url, token: target.token, rate: WRITES_PER_SECOND, seconds: seconds ?? LONGEST_RUN_S, firstId: 1, connections: 16 })
    let pruneStartS: number | undefined
    let pruneEndS: number | undefined
    if (backlog > 0) {
      for (;;) {
        await sleep(100)
        const through = await store.prunedThrough()
        const atS = (performance.now() - started) / 1000
        if (pruneStartS === undefined && through > 0) pruneStartS = atS
        if (through >= backlog) {
          pruneEndS = atS
          break
        }
        if (atS > LONGEST_RUN_S - 5) throw new Error(`${name}: pruning reached ${through} of ${backlog} in ${LONGEST_RUN_S} s`)
      }
      await sleep(AFTER_PRUNING_MS)
      writer.child.send({ type: 'stop' })
    }
    const report = await writer.done
    const wallSeconds = (performance.now() - started) / 1000
    const serverCpuShare = (processCpuSeconds(pid) - cpuBefore) / wallSeconds
    const serverWaitingShare = (scheduledSeconds(pid).waiting - waitingBefore) / wallSeconds
    const measured = window ?? { fromS: pruneStartS ?? 0, toS: pruneEndS ?? 0 }
    const latencies = latenciesBetween(report, measured.fromS, measured.toS)
    const before = latenciesBetween(report, WARM_UP_MS / 1000, measured.fromS)
    const result: PruneRun = {
      engine,
      round,
      backlog,
      ...(pruneStartS === undefined || pruneEndS === undefined
        ? {}
        : { pruneStartS: fixed(pruneStartS), pruneEndS: fixed(pruneEndS), prunedPerSecond: Math.round(backlog / (pruneEndS - pruneStartS)) }),
      window: { fromS: fixed(measured.fromS), toS: fixed(measured.toS) },
      writesInWindow: latencies.length,
      p50Ms: fixed(percentile(latencies, 0.5)),
      p99Ms: fixed(percentile(latencies, 0.99)),
      maxMs: fixed(Math.max(...latencies)),
      beforeP99Ms: fixed(percentile(before, 0.99)),
      failures: report.failures,
      serverCpuShare: fixed(serverCpuShare, 2),
      serverWaitingShare: fixed(serverWaitingShare, 2),
      writerCpuShare: fixed(report.processCpuSeconds / wallSeconds, 2)
    }
    process.stderr.write(`changes prune ${name}: ${JSON.stringify(result)}\n`)
    return result
  } finally {
    if (target !== undefined) await harness.servers.stop(target)
    await store.close()
  }
}

export async function measurePruning (harness: Harness, engines: readonly Engine[]): Promise<PruneResult[]> {
  const backlog = Number(process.env.BENCH_CHANGES_PRUNE ?? (harness.quick ? 100_000 : 1_000_000))
  const rounds = harness.roundsOf(2)
  const results: PruneResult[] = []
  for (const engine of engines) {
    const runs: PruneRun[] = []
    for (let round = 1; round <= rounds; round++) {
      const pruning = await run(harness, engine, round, backlog)
      const seconds = Math.ceil((pruning.pruneEndS ?? 0) + AFTER_PRUNING_MS / 1000)
      runs.push(pruning, await run(harness, engine, round, 0, seconds, pruning.window))
    }
    const withPruning = runs.filter((entry) => entry.backlog > 0)
    const without = runs.filter((entry) => entry.backlog === 0)
    const p99WithPruningMs = median(withPruning.map((entry) => entry.p99Ms))
    const p99WithoutMs = median(without.map((entry) => entry.p99Ms))
    results.push({
      engine,
      backlog,
      runs,
      p99WithPruningMs,
      p99WithoutMs,
      ratio: fixed(p99WithPruningMs / p99WithoutMs, 2),
      prunedPerSecond: Math.round(median(withPruning.map((entry) => entry.prunedPerSecond ?? 0)))
    })
  }
  printPruning(results)
  return results
}

function printPruning (results: readonly PruneResult[]): void {
  process.stdout.write(`\nA write's latency at ${WRITES_PER_SECOND} POST/s (open loop) while the service prunes a backlog of expired changes ` +
    `(CHANGES_RETENTION=${RETENTION}), against the same load on a store without one, in the same window from the start\n`)
  process.stdout.write(`${formatTable(['engine', 'round', 'backlog', 'pruning s', 'pruned/s', 'window s', 'writes', 'p50 ms', 'p99 ms', 'max ms', 'p99 before ms',
    'failures', 'server CPU', 'server waiting', 'writer CPU'], results.flatMap((result) => result.runs.map((entry) => [entry.engine, String(entry.round), String(entry.backlog),
    entry.pruneStartS === undefined ? '' : `${entry.pruneStartS}–${entry.pruneEndS}`, entry.prunedPerSecond === undefined ? '' : String(entry.prunedPerSecond),
    `${entry.window.fromS}–${entry.window.toS}`, String(entry.writesInWindow), String(entry.p50Ms), String(entry.p99Ms), String(entry.maxMs), String(entry.beforeP99Ms),
    Object.keys(entry.failures).length === 0 ? '' : JSON.stringify(entry.failures), `${Math.round(entry.serverCpuShare * 100)} %`, `${Math.round(entry.serverWaitingShare * 100)} %`,
    `${Math.round(entry.writerCpuShare * 100)} %`])), 1)}\n`)
  for (const result of results) {
    process.stdout.write(`${result.engine}: write p99 ${result.p99WithPruningMs} ms while ${result.backlog} expired changes are pruned ` +
      `(${result.prunedPerSecond}/s), ${result.p99WithoutMs} ms without (× ${result.ratio})\n`)
  }
}
