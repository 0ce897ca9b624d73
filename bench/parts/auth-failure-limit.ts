import { join } from 'node:path'
import { median, record, roundRatios, summarize, type Row, type Samples } from '../figures.js'
import { PAIRED_ROUNDS, PRELOADED, type Harness, type Part } from '../harness.js'
import type { Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'

const OFF_TARGET = 'sqlite-auth-failure-limit-off'
const ON_TARGET = 'sqlite-auth-failure-limit-default'
/** A second service with the default: how far two processes that run the same code differ (an A/A control). */
const CONTROL_TARGET = 'sqlite-auth-failure-limit-default-control'
const TARGETS = [OFF_TARGET, ON_TARGET, CONTROL_TARGET]

/**
 * What the failed-authentication limit costs a request with a valid token: two SQLite services, one with
 * `AUTH_FAILURE_LIMIT_PER_MINUTE=0` (off) and one with the default (100), GET by id with a valid token,
 * in interleaved rounds whose order alternates. Each has its own database, preloaded alike. The ratios
 * are medians of per-round ratios: a drift of the machine moves both services of a round alike. A third
 * service, with the default too, is the control: its ratio to the first default one is what two processes
 * of the same code differ by here, against which the limit's cost is to be read.
 */
export async function compareAuthFailureLimit (harness: Harness): Promise<Row[]> {
  const offService = await harness.servers.startService('auth-limit-off', `sqlite:${join(harness.workFolder, 'auth-limit-off.db')}`,
    { AUTH_FAILURE_LIMIT_PER_MINUTE: '0' })
  const onService = await harness.servers.startService('auth-limit-on', `sqlite:${join(harness.workFolder, 'auth-limit-on.db')}`)
  const controlService = await harness.servers.startService('auth-limit-control', `sqlite:${join(harness.workFolder, 'auth-limit-control.db')}`)
  const off: Target = { ...offService, name: OFF_TARGET }
  const on: Target = { ...onService, name: ON_TARGET }
  const control: Target = { ...controlService, name: CONTROL_TARGET }
  const targets = [off, on, control]
  for (const target of targets) {
    await harness.preload(target, PRELOADED)
    // Not recorded: the first requests, and the code paths the preload did not run.
    await harness.measure(target, 'get', 1)
  }

  const samples: Samples = new Map()
  const rounds = harness.roundsOf(PAIRED_ROUNDS)
  for (let round = 1; round <= rounds; round++) {
    // Each round starts with another of the three, and the order turns: no service is always first.
    for (let turn = 0; turn < targets.length; turn++) {
      const target = targets[(round + turn) % targets.length] as Target
      const sample = await harness.measure(target, 'get', harness.durationSeconds)
      record(samples, `${target.name}/get`, sample)
      harness.logSample(round, `${target.name}/get`, sample)
    }
  }
  for (const target of targets) await harness.servers.stop(target)

  const perRound = (target: string, reference: string, measure: 'rps' | 'serverCpuUs') =>
    Number(median(roundRatios(samples, `${target}/get`, `${reference}/get`, measure)).toFixed(3))
  const rows = TARGETS.map((target) => {
    const reference = target === CONTROL_TARGET ? ON_TARGET : OFF_TARGET
    return {
      target,
      load: 'get',
      ...summarize(samples.get(`${target}/get`) ?? [], 1),
      ratio: perRound(target, reference, 'rps'),
      cpuRatio: perRound(target, reference, 'serverCpuUs'),
      against: reference
    }
  })
  printTable(harness, rows, samples, rounds)
  return rows
}

function printTable (harness: Harness, rows: Row[], samples: Samples, rounds: number): void {
  const header = ['comparison', 'req/s ref', 'req/s', 'req/s ÷', 'µs/req ref', 'µs/req', 'CPU ÷',
    'per-round req/s ÷ range', 'per-round CPU ÷ range', 'p99 ms ref/this', 'errors', `${harness.generator.name} CPU`]
  const lines = [[ON_TARGET, 'GET by id, limit 100 (default) ÷ limit 0 (off)'], [CONTROL_TARGET, 'GET by id, default ÷ default (A/A control)']]
    .map(([target, title]) => {
      const row = rows.find((candidate) => candidate.target === target) as Row
      const reference = rows.find((candidate) => candidate.target === row.against) as Row
      const range = (measure: 'rps' | 'serverCpuUs') => ratioRange(roundRatios(samples, `${row.target}/get`, `${row.against}/get`, measure))
      return [title as string, String(reference.rps), String(row.rps), row.ratio.toFixed(3), String(reference.serverCpuUs), String(row.serverCpuUs),
        row.cpuRatio.toFixed(3), range('rps'), range('serverCpuUs'), `${reference.p99}/${row.p99}`, String(reference.errors + row.errors),
        generatorCell(Math.max(reference.generatorCpuShare, row.generatorCpuShare), reference.valid && row.valid)]
    })
  process.stdout.write('\nSQLite, three services: the failed-authentication limit off, at its default, and at its default again; ' +
    `medians of ${describeRounds(rounds, harness.durationSeconds)}, ratios: medians of the per-round ratios\n${formatTable(header, lines, 1)}\n`)
}

export const authFailureLimitPart: Part = {
  name: 'auth-failure-limit',
  owns: (row) => row.against === OFF_TARGET || row.against === ON_TARGET,
  compare: compareAuthFailureLimit,
  rounds: (harness) => harness.roundsOf(PAIRED_ROUNDS)
}
