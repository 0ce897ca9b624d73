import { record, summarize, type Row, type Samples } from '../figures.js'
import type { Harness } from '../harness.js'
import type { Load } from '../load-generator.js'
import type { Target } from '../processes.js'

/**
 * Two credentials of one running service, measured against each other: a 1 s warm-up of each load with
 * each (not recorded: the code paths the preload did not run), then the harness's rounds, each load
 * measured with both in an order that alternates round by round, so that a drift within a round does not
 * always favour the same one. Rows are `other` ÷ `reference` (their `against`), and `reference` ÷ itself.
 *
 * Both POST into one id sequence: every POST measurement inserts above all the ids before it, as in the
 * backends' rows (appending to the table's B-tree), and never repeats an id of the other target (an
 * idempotent repeat, not an insert). Ranges of their own would have one target insert into the middle
 * of the table, a different and dearer write.
 */
export async function measureTokenPair (harness: Harness, reference: Target, other: Target, loads: readonly Load[]): Promise<{ rows: Row[], samples: Samples }> {
  let nextId = 1_000_000_000_000n
  const measureNext = async (target: Target, load: Load, seconds: number) => {
    target.nextId = nextId
    const sample = await harness.measure(target, load, seconds)
    nextId = target.nextId
    return sample
  }
  for (const load of loads) for (const target of [reference, other]) await measureNext(target, load, 1)

  const samples: Samples = new Map()
  for (let round = 1; round <= harness.rounds; round++) {
    for (const load of loads) {
      for (const target of round % 2 === 1 ? [reference, other] : [other, reference]) {
        const sample = await measureNext(target, load, harness.durationSeconds)
        const key = `${target.name}/${load}`
        record(samples, key, sample)
        harness.logSample(round, key, sample)
      }
    }
  }

  // Tenths of a µs and three decimals in the ratios: the questions are about a few % of some 40 µs.
  const rows = loads.flatMap((load) => {
    const baseline = summarize(samples.get(`${reference.name}/${load}`) ?? [], 1)
    return [reference.name, other.name].map((target) => {
      const summary = summarize(samples.get(`${target}/${load}`) ?? [], 1)
      return {
        target,
        load,
        ...summary,
        ratio: Number((summary.rps / baseline.rps).toFixed(3)),
        cpuRatio: Number((summary.serverCpuUs / baseline.serverCpuUs).toFixed(3)),
        against: reference.name
      }
    })
  })
  return { rows, samples }
}
