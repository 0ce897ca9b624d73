import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { renderChart } from './chart.js'
import { SATURATED_GENERATOR, type Row } from './figures.js'
import type { Harness, Machine, Part } from './harness.js'
import { ROOT } from './processes.js'

/**
 * What a run leaves behind: its tables on standard output, and its results files in bench/results
 * (`{ machine, rows }` as JSON, and the chart of the backends' rows).
 */

const RESULTS = join(ROOT, 'bench', 'results')

/** Writes a file of bench/results; returns its path as the run's output names it. */
export function writeResultsFile (file: string, contents: string): string {
  mkdirSync(RESULTS, { recursive: true })
  writeFileSync(join(RESULTS, file), contents)
  return `bench/results/${file}`
}

export const asJson = (value: unknown) => JSON.stringify(value, null, 2) + '\n'

interface Results {
  machine: Machine
  rows: Row[]
  partialRuns?: Record<string, Machine>
}

/**
 * Writes the rows of the parts measured to latest.json (quick.json in a quick run). When some parts
 * were not measured, their rows (and the machine they were measured on) are kept from the file, and
 * this run's machine goes to `partialRuns`. The chart is drawn when a charted part was measured.
 */
export function writeResults (harness: Harness, rows: Row[], measured: readonly Part[], parts: readonly Part[]): void {
  const file = harness.quick ? 'quick' : 'latest'
  const path = join(RESULTS, `${file}.json`)
  const partIndex = (row: Row) => parts.findIndex((part) => part.owns(row))
  let results: Results
  if (measured.length === parts.length || !existsSync(path)) {
    results = { machine: harness.machine(), rows }
  } else {
    const earlier = JSON.parse(readFileSync(path, 'utf8')) as Results
    const partialRuns = { ...earlier.partialRuns }
    for (const part of measured) partialRuns[part.name] = part.rounds === undefined ? harness.machine() : { ...harness.machine(), rounds: part.rounds(harness) }
    results = {
      machine: earlier.machine,
      rows: [...earlier.rows.filter((row) => !measured.some((part) => part.owns(row))), ...rows]
        .sort((a, b) => partIndex(a) - partIndex(b)),
      partialRuns
    }
  }
  const written = [writeResultsFile(`${file}.json`, asJson(results))]
  const charted = measured.filter((part) => part.charted === true)
  if (charted.length > 0) {
    written.push(writeResultsFile(`${file}.svg`, renderChart(rows.filter((row) => charted.some((part) => part.owns(row))), harness.machine())))
  }
  process.stdout.write(`\nwrote ${written.join(' and ')}\n`)
}

/** A table's text: columns as wide as their widest cell, the first `leftAligned` padded on the right, the others on the left. */
export function formatTable (header: string[], lines: string[][], leftAligned = 0): string {
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) =>
    column < leftAligned ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)).join('  ')
  return `${format(header)}\n${lines.map(format).join('\n')}`
}

/** The load generator's column: its share of a core, and whether that leaves the measurement valid. */
export const generatorCell = (share: number, valid: boolean) => `${Math.round(share * 100)} %${valid ? '' : ' INVALID'}`

/** The lowest and highest of a part's per-round ratios. */
export const ratioRange = (ratios: number[]) => `${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}`

/** "N rounds of S s", as the tables' titles say it. */
export const describeRounds = (rounds: number, seconds: number) => `${rounds} round${rounds === 1 ? '' : 's'} of ${seconds} s`

/** The table of the backends' rows: ratios to the baseline, and to the baseline with Fastify's request logging. */
export function printTable (rows: Row[], generatorName: string): void {
  const header = ['target', 'load', 'req/s', '÷ baseline', '÷ logged', 'p50 ms', 'p99 ms', 'server µs/req', 'CPU ÷ baseline', 'CPU ÷ logged',
    'db µs/req', 'peak RSS MB', 'errors', `${generatorName} CPU`]
  const lines = rows.map((row) => [row.target, row.load, String(row.rps), row.ratio.toFixed(2), row.second?.ratio.toFixed(2) ?? '',
    String(row.p50), String(row.p99), String(row.serverCpuUs), row.cpuRatio.toFixed(2), row.second?.cpuRatio.toFixed(2) ?? '',
    row.databaseCpuUs === 0 ? '' : String(row.databaseCpuUs), String(row.rssMb), String(row.errors), generatorCell(row.generatorCpuShare, row.valid)])
  process.stdout.write(`\n${formatTable(header, lines)}\n`)
  const invalid = rows.filter((row) => !row.valid)
  if (invalid.length > 0) {
    process.stdout.write(`\nINVALID: the load generator was ${SATURATED_GENERATOR * 100} % busy or more in ${invalid.length} measurements ` +
      `(${invalid.map((row) => `${row.target}/${row.load}`).join(', ')}): their req/s measure the generator, not the server; ` +
      'compare their server µs/req instead\n')
  }
}
