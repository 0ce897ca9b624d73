import { join } from 'node:path'
import { record, summarize, type Row, type Samples } from '../figures.js'
import { LOADS, PRELOADED, type Harness, type Part } from '../harness.js'
import { printTable } from '../report.js'

const BASELINE = 'baseline'
const LOGGED_BASELINE = 'baseline-logged'

/**
 * The service on SQLite, PostgreSQL (embedded) and memory against a bare-Fastify baseline
 * (bench/baseline.ts), each with 2000 preloaded plants: POST, GET by id and a page of plants, in
 * interleaved rounds; ratios ÷ the baseline's medians, and ÷ the same baseline with Fastify's default
 * request logging on (`baseline-logged`): the first anchor is as fast as Fastify goes, the second what
 * a user would otherwise run. The baseline's medians are the run's regime.
 */
export async function compareBackends (harness: Harness): Promise<Row[]> {
  const { servers } = harness
  const targets = [
    await servers.startBaseline(BASELINE),
    await servers.startBaseline(LOGGED_BASELINE, { logged: true }),
    await servers.startService('sqlite', `sqlite:${join(harness.workFolder, 'bench.db')}`),
    await servers.startService('postgres', await harness.postgresDatabase()),
    await servers.startService('memory', 'memory:')
  ]
  for (const target of targets) await harness.preload(target, PRELOADED)

  const samples: Samples = new Map()
  for (let round = 1; round <= harness.rounds; round++) {
    for (const load of LOADS) {
      for (const target of targets) {
        const sample = await harness.measure(target, load, harness.durationSeconds)
        const key = `${target.name}/${load}`
        record(samples, key, sample)
        harness.logSample(round, key, sample)
      }
    }
  }
  // Idle servers would still share CPU 0 with whatever is measured next.
  for (const target of targets) await servers.stop(target)

  const rows = targets.flatMap((target) => LOADS.map((load) => {
    const summary = summarize(samples.get(`${target.name}/${load}`) ?? [])
    const baseline = summarize(samples.get(`${BASELINE}/${load}`) ?? [])
    const logged = summarize(samples.get(`${LOGGED_BASELINE}/${load}`) ?? [])
    return {
      target: target.name,
      load,
      ...summary,
      ratio: Number((summary.rps / baseline.rps).toFixed(2)),
      cpuRatio: Number((summary.serverCpuUs / baseline.serverCpuUs).toFixed(2)),
      against: BASELINE,
      second: {
        against: LOGGED_BASELINE,
        ratio: Number((summary.rps / logged.rps).toFixed(2)),
        cpuRatio: Number((summary.serverCpuUs / logged.serverCpuUs).toFixed(2))
      }
    }
  }))
  harness.recordRegime(rows.filter((row) => row.target === BASELINE))
  printTable(rows, harness.generator.name)
  return rows
}

export const backendsPart: Part = {
  name: 'backends',
  owns: (row) => row.against === BASELINE,
  compare: compareBackends,
  charted: true
}
