import { loadavg } from 'node:os'
import { startPgBouncer, type PgBouncer } from '../../scripts/topologies/pgbouncer.js'
import { median, record, summarize, type Row, type Samples } from '../figures.js'
import { PRELOADED, type Harness, type Part } from '../harness.js'
import type { Load } from '../load-generator.js'
import { pinProcess, processCpuSeconds, type Target } from '../processes.js'
import { asJson, formatTable, generatorCell, writeResultsFile } from '../report.js'

const DIRECT = 'postgres'
const LOADS: readonly Load[] = ['post', 'get']
/** Fixed ports for the bench's poolers (the topologies tests' range is 15450-15499; these are its last two). */
const PORTS = { session: 15498, transaction: 15499 } as const

/**
 * The service on PostgreSQL directly (`DATABASE_POOLING=direct`), through PgBouncer 1.18 in session
 * mode (no setting) and through PgBouncer in transaction mode (`DATABASE_POOLING=transaction`), each
 * on a database of its own with 2000 preloaded plants: POST and GET by id in interleaved rounds;
 * ratios ÷ direct. PgBouncer runs on the servers' CPU; its CPU per request is reported apart.
 * Figures go to bench/results/pooling.json; this part adds no rows to latest.json.
 */
export async function comparePooling (harness: Harness): Promise<Row[]> {
  const { servers } = harness
  const poolers: PgBouncer[] = []
  try {
    const direct = await servers.startService(DIRECT, await harness.postgresDatabase())
    const pooled = async (mode: 'session' | 'transaction') => {
      const pooler = await startPgBouncer(await harness.postgresDatabase(), PORTS[mode], mode)
      poolers.push(pooler)
      if (harness.pinning) pinProcess(pooler.pid, 0)
      const target = await servers.startService(`${DIRECT}-pgbouncer-${mode}`, pooler.url, mode === 'transaction' ? { DATABASE_POOLING: 'transaction' } : {})
      return { target, pooler }
    }
    const targets: Array<{ target: Target, pooler?: PgBouncer }> = [{ target: direct }, await pooled('session'), await pooled('transaction')]
    for (const { target } of targets) await harness.preload(target, PRELOADED)

    const samples: Samples = new Map()
    const poolerCpuUs = new Map<string, number[]>()
    for (let round = 1; round <= harness.rounds; round++) {
      for (const load of LOADS) {
        for (const { target, pooler } of targets) {
          const before = pooler === undefined ? 0 : processCpuSeconds(pooler.pid)
          const sample = await harness.measure(target, load, harness.durationSeconds)
          const key = `${target.name}/${load}`
          record(samples, key, sample)
          poolerCpuUs.set(key, [...(poolerCpuUs.get(key) ?? []), pooler === undefined ? 0 : (processCpuSeconds(pooler.pid) - before) / sample.requests * 1e6])
          harness.logSample(round, key, sample)
        }
      }
    }
    for (const { target } of targets) await servers.stop(target)

    const rows = targets.flatMap(({ target }) => LOADS.map((load) => {
      const summary = summarize(samples.get(`${target.name}/${load}`) ?? [])
      const reference = summarize(samples.get(`${DIRECT}/${load}`) ?? [])
      return {
        target: target.name,
        load,
        ...summary,
        ratio: Number((summary.rps / reference.rps).toFixed(2)),
        cpuRatio: Number((summary.serverCpuUs / reference.serverCpuUs).toFixed(2)),
        against: DIRECT,
        poolerCpuUs: Math.round(median(poolerCpuUs.get(`${target.name}/${load}`) ?? [0]))
      }
    }))
    const header = ['target', 'load', 'req/s', '÷ direct', 'p50 ms', 'p99 ms', 'server µs/req', 'CPU ÷ direct', 'PostgreSQL µs/req', 'PgBouncer µs/req', 'errors', `${harness.generator.name} CPU`]
    process.stdout.write(`\n${formatTable(header, rows.map((row) => [row.target, row.load, String(row.rps), row.ratio.toFixed(2), String(row.p50), String(row.p99),
      String(row.serverCpuUs), row.cpuRatio.toFixed(2), String(row.databaseCpuUs), String(row.poolerCpuUs), String(row.errors),
      generatorCell(row.generatorCpuShare, row.valid)]))}\n`)
    // The machine may be shared: its load averages at the end of the run say how much.
    const written = writeResultsFile(harness.quick ? 'pooling-quick.json' : 'pooling.json',
      asJson({ machine: { ...harness.machine(), loadAverages: loadavg().map((load) => Number(load.toFixed(2))) }, rows }))
    process.stdout.write(`\nwritten to ${written}\n`)
    return rows
  } finally {
    for (const pooler of poolers) await pooler.stop()
  }
}

export const poolingPart: Part = {
  name: 'pooling',
  owns: (row) => row.against === DIRECT,
  compare: comparePooling
}
