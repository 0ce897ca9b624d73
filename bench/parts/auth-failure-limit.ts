import { join } from 'node:path'
import { record, roundRatios, summarize, type Row, type Samples } from '../figures.js'
import { PRELOADED, type Harness, type Part } from '../harness.js'
import type { Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'

const OFF_TARGET = 'sqlite-auth-failure-limit-off'
const ON_TARGET = 'sqlite-auth-failure-limit-default'
/** The bound: the limit may cost the normal path 2 % of CPU at most. */
const TOLERANCE = 0.02

/**
 * What the failed-authentication limit costs a request with a valid token: two SQLite services, one with
 * `AUTH_FAILURE_LIMIT_PER_MINUTE=0` (off) and one with the default (100), GET by id with a valid token,
 * in interleaved rounds whose order alternates. Each has its own database, preloaded alike.
 */
export async function compareAuthFailureLimit (harness: Harness): Promise<Row[]> {
  const offService = await harness.servers.startService('auth-limit-off', `sqlite:${join(harness.workFolder, 'auth-limit-off.db')}`,
    { AUTH_FAILURE_LIMIT_PER_MINUTE: '0' })
  const onService = await harness.servers.startService('auth-limit-on', `sqlite:${join(harness.workFolder, 'auth-limit-on.db')}`)
  const off: Target = { ...offService, name: OFF_TARGET }
  const on: Target = { ...onService, name: ON_TARGET }
  for (const target of [off, on]) {
    await harness.preload(target, PRELOADED)
    // Not recorded: the first requests, and the code paths the preload did not run.
    await harness.measure(target, 'get', 1)
  }

  const samples: Samples = new Map()
  for (let round = 1; round <= harness.rounds; round++) {
    for (const target of round % 2 === 1 ? [off, on] : [on, off]) {
      const sample = await harness.measure(target, 'get', harness.durationSeconds)
      record(samples, `${target.name}/get`, sample)
      harness.logSample(round, `${target.name}/get`, sample)
    }
  }
  for (const target of [off, on]) await harness.servers.stop(target)

  const reference = summarize(samples.get(`${OFF_TARGET}/get`) ?? [], 1)
  const rows = [OFF_TARGET, ON_TARGET].map((target) => {
    const summary = summarize(samples.get(`${target}/get`) ?? [], 1)
    return {
      target,
      load: 'get',
      ...summary,
      ratio: Number((summary.rps / reference.rps).toFixed(3)),
      cpuRatio: Number((summary.serverCpuUs / reference.serverCpuUs).toFixed(3)),
      against: OFF_TARGET
    }
  })
  printTable(harness, rows, samples)
  return rows
}

function printTable (harness: Harness, rows: Row[], samples: Samples): void {
  const [offRow, onRow] = rows as [Row, Row]
  const perRound = (measure: 'rps' | 'serverCpuUs') => ratioRange(roundRatios(samples, `${ON_TARGET}/get`, `${OFF_TARGET}/get`, measure))
  const header = ['comparison', 'req/s off', 'req/s default', 'req/s ÷', 'µs/req off', 'µs/req default', 'CPU ÷',
    'per-round req/s ÷', 'per-round CPU ÷', 'p99 ms off/default', 'errors', `${harness.generator.name} CPU`, `CPU within ${TOLERANCE * 100} %`]
  const line = ['GET by id, AUTH_FAILURE_LIMIT_PER_MINUTE=100 ÷ 0', String(offRow.rps), String(onRow.rps), onRow.ratio.toFixed(3),
    String(offRow.serverCpuUs), String(onRow.serverCpuUs), onRow.cpuRatio.toFixed(3), perRound('rps'), perRound('serverCpuUs'),
    `${offRow.p99}/${onRow.p99}`, String(offRow.errors + onRow.errors),
    generatorCell(Math.max(offRow.generatorCpuShare, onRow.generatorCpuShare), offRow.valid && onRow.valid),
    onRow.cpuRatio - 1 <= TOLERANCE ? 'yes' : 'no']
  process.stdout.write('\nSQLite, two services, the failed-authentication limit off and at its default; ' +
    `medians of ${describeRounds(harness.rounds, harness.durationSeconds)}, ratios default ÷ off\n${formatTable(header, [line], 1)}\n`)
}

export const authFailureLimitPart: Part = {
  name: 'auth-failure-limit',
  owns: (row) => row.against === OFF_TARGET,
  compare: compareAuthFailureLimit
}
