declare module 'parse-prometheus-text-format' {
  /** Metric families as the parser returns them: histogram samples carry `buckets`, `count` and `sum`. */
  export default function parsePrometheusTextFormat (text: string): unknown[]
}
