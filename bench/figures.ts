/**
 * What a measurement yields and what the parts make of it: a sample per measurement, medians over
 * rounds, ratios to a reference.
 */

/** A generator this busy may be what limits the rate: its measurement is marked invalid. */
export const SATURATED_GENERATOR = 0.9

export interface Sample {
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

/** A measurement's samples over the rounds, by `target/load` (or by target where a part has one load). */
export type Samples = Map<string, Sample[]>

export function record (samples: Samples, key: string, sample: Sample): void {
  samples.set(key, [...(samples.get(key) ?? []), sample])
}

/**
 * The ratio of `key`'s samples to `referenceKey`'s, round by round: the two run next to each other
 * in every round, so a machine that speeds up or slows down between rounds moves both alike.
 */
export const roundRatios = (samples: Samples, key: string, referenceKey: string, measure: 'rps' | 'serverCpuUs') =>
  (samples.get(key) ?? []).map((sample, index) => sample[measure] / (samples.get(referenceKey)?.[index]?.[measure] ?? NaN))

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] as number : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2
}

/** Medians of a target's samples; `cpuDecimals` for the server's µs per request (whole µs unless asked). */
export function summarize (samples: Sample[], cpuDecimals = 0) {
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

export type Summary = ReturnType<typeof summarize>

/** A measured target and load, with its ratios to the reference named in `against` (itself for the reference). */
export type Row = Summary & {
  target: string
  load: string
  ratio: number
  cpuRatio: number
  against: string
  /** Its ratios to a second reference of the same run, where a part has one. */
  second?: { against: string, ratio: number, cpuRatio: number }
}
