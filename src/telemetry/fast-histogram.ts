import type { Metric, Registry } from 'prom-client'

/** A sample as prom-client's registry formats it. */
interface Sample {
  readonly metricName: string
  readonly labels: Readonly<Record<string, string | number>>
  readonly value: number
}

export interface FastHistogramOptions<Label extends string> {
  readonly name: string
  readonly help: string
  readonly labelNames: readonly Label[]
  /** Upper bounds, ascending; `+Inf` is added. */
  readonly buckets: readonly number[]
}

/** One label set's counters. */
export class HistogramSeries {
  /** Per bucket, not cumulative; the last one is `+Inf`. */
  readonly counts: Float64Array
  sum = 0
  count = 0

  constructor (private readonly bounds: readonly number[], readonly labels: Readonly<Record<string, string>>) {
    this.counts = new Float64Array(bounds.length + 1)
  }

  observe (value: number): void {
    let bucket = 0
    while (bucket < this.bounds.length && value > (this.bounds[bucket] as number)) bucket++
    this.counts[bucket]! += 1
    this.sum += value
    this.count++
  }
}

/**
 * A histogram that prom-client's registry exposes like its own, for the per-request paths. prom-client's
 * `observe` hashes the label set on every call (0.8 µs measured, bench/results/2026-11-23-2037-issue-14-observability-superseded.md); here a caller
 * resolves its series once (a route's closure per status code, a store's per operation) and an
 * observation is a bucket search and two additions.
 */
export class FastHistogram<Label extends string = string> {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  readonly name: string
  readonly help: string
  private readonly labelNames: readonly Label[]
  private readonly bounds: readonly number[]
  private readonly bySeriesKey = new Map<string, HistogramSeries>()

  constructor (options: FastHistogramOptions<Label>) {
    this.name = options.name
    this.help = options.help
    this.labelNames = options.labelNames
    this.bounds = options.buckets
  }

  /** The series of these label values, in `labelNames` order; made on first use. */
  series (...values: Array<string | number>): HistogramSeries {
    const key = values.join('\u0000')
    let series = this.bySeriesKey.get(key)
    if (series === undefined) {
      const labels: Record<string, string> = {}
      this.labelNames.forEach((label, index) => { labels[label] = String(values[index] ?? '') })
      series = new HistogramSeries(this.bounds, labels)
      this.bySeriesKey.set(key, series)
    }
    return series
  }

  /** Exposed by `registry` like its own metrics (its typings know only its own classes; `get` is what it reads). */
  registerWith (registry: Registry): void {
    registry.registerMetric(this as unknown as Metric)
  }

  /** What prom-client's registry formats: `_bucket` (cumulative, with `le`), `_sum` and `_count` per series. */
  get (): { name: string, help: string, type: 'histogram', aggregator: 'sum', values: Sample[] } {
    const values: Sample[] = []
    for (const series of this.bySeriesKey.values()) {
      let cumulative = 0
      series.counts.forEach((count, bucket) => {
        cumulative += count
        const le = bucket < this.bounds.length ? this.bounds[bucket] as number : '+Inf'
        values.push({ metricName: `${this.name}_bucket`, labels: { ...series.labels, le }, value: cumulative })
      })
      values.push({ metricName: `${this.name}_sum`, labels: series.labels, value: series.sum })
      values.push({ metricName: `${this.name}_count`, labels: series.labels, value: series.count })
    }
    return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values }
  }
}
