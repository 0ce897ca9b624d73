import { createReadStream, statSync } from 'node:fs'
import type { Readable } from 'node:stream'
import type { Config } from '../config.js'
import { counted } from '../counted.js'
import { CONFLICT_POLICIES, importPlants, type ConflictPolicy, type ImportCounts, type ImportProblem, type ImportResult } from '../transfer/import.js'
import { ndjsonLines } from '../transfer/ndjson-lines.js'
import { defineCommand } from './command.js'
import { withCommandStore } from './command-store.js'
import { JSON_OPTION } from './options.js'
import { ProgressLine } from './progress-line.js'
import { DATA_EXIT_CODES, ENVIRONMENT } from './usage.js'

export const IMPORT_USAGE = `Usage: plantstore import FILE|- [--on-conflict report|replace|fail] [--json]

Creates the plants of an NDJSON file (an export's lines; - reads stdin) in the store of DATABASE_URL,
through the store's batched writes. A line whose plant is stored already changes nothing, so importing
a file twice changes nothing the second time. Each created or replaced plant raises its webhook event,
as a POST or a PUT would. Every line that is not taken is reported on stderr with its line number.

Options:
  --on-conflict  what to do with a line whose id is stored with another name or tag:
                   report   leave the stored plant, report the line (the default)
                   replace  store the line's plant in its place
                   fail     stop at that line; the lines before it stay imported
  --json         print the counts as one JSON document
  -h, --help     show this help

${ENVIRONMENT}
${DATA_EXIT_CODES}`

interface ImportInvocation {
  readonly command: 'import'
  /** The NDJSON file to read, or `-` for standard input. */
  readonly file: string
  readonly onConflict: ConflictPolicy
  readonly json: boolean
}

/** Lines reported one by one on stderr; past them only their number is given, so a bad file cannot flood a terminal. */
const REPORTED_PROBLEMS = 100

/**
 * `plantstore import FILE|-`: each line that is not taken goes to stderr with its number, then the counts
 * go to stdout. Exit code 0 when every line was taken, 1 when one was not (a conflict left or stopped
 * at, a rejected line) or the store failed.
 */
export const importCommand = defineCommand<ImportInvocation>({
  name: 'import',
  synopsis: 'import FILE|-',
  summary: 'create the plants of an NDJSON file',
  usage: IMPORT_USAGE,
  parse ({ options }) {
    const parsed = options({ 'on-conflict': { type: 'string' }, ...JSON_OPTION }, true)
    if (parsed.command === 'help') return parsed
    const { fail, text } = parsed
    const [file, ...more] = parsed.positionals
    if (file === undefined || file === '') throw fail('import needs FILE, an NDJSON file of plants, or - for standard input')
    if (more.length > 0) throw fail(`import takes one FILE, got ${parsed.positionals.length}`)
    const onConflict = text('on-conflict') ?? 'report'
    if (!(CONFLICT_POLICIES as readonly string[]).includes(onConflict)) {
      throw fail(`--on-conflict must be one of ${CONFLICT_POLICIES.join(', ')}, got ${JSON.stringify(onConflict)}`)
    }
    return { command: 'import', file, onConflict: onConflict as ConflictPolicy, json: parsed.values.json === true }
  },
  run: importFile
})

async function importFile (invocation: ImportInvocation, config: Config): Promise<number> {
  const { input, size, name } = openInput(invocation.file)
  return withCommandStore(config, 'a memory store lives only inside the running service, so import cannot reach it; POST the plants to the service instead', async (store) => {
    const progress = new ProgressLine('imported')
    let problems = 0
    const report = (problem: ImportProblem): void => {
      problems++
      if (problems > REPORTED_PROBLEMS) return
      progress.finish()
      process.stderr.write(`plantstore: ${name} line ${problem.line}: ${problem.kind === 'rejected' ? 'rejected' : 'conflict'}: ${problem.message}\n`)
    }
    const startedAt = performance.now()
    let result: ImportResult
    try {
      result = await importPlants(ndjsonLines(input), store, {
        onConflict: invocation.onConflict,
        onProblem: report,
        onProgress: (counts) => { progress.update(settled(counts), size === undefined ? undefined : bytesRead(input) / size) }
      })
    } finally {
      progress.finish()
      input.destroy()
    }
    if (problems > REPORTED_PROBLEMS) {
      process.stderr.write(`plantstore: ${problems - REPORTED_PROBLEMS} more lines were not taken; only the first ${REPORTED_PROBLEMS} are listed\n`)
    }
    const seconds = (performance.now() - startedAt) / 1000
    process.stdout.write(invocation.json ? `${JSON.stringify(summaryDocument(result, seconds))}\n` : summaryText(name, result, seconds))
    return result.stoppedAtLine === undefined && result.counts.conflicts === 0 && result.counts.rejected === 0 ? 0 : 1
  })
}

function openInput (file: string): { readonly input: Readable, readonly size?: number, readonly name: string } {
  if (file === '-') return { input: process.stdin, name: 'stdin' }
  let size: number
  try {
    const stat = statSync(file)
    if (!stat.isFile()) throw new Error(`${file} is not a file`)
    size = stat.size
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === undefined) throw error
    throw new Error(`cannot read ${file} (${code})`, { cause: error })
  }
  return { input: createReadStream(file, { highWaterMark: 256 * 1024 }), size, name: file }
}

function bytesRead (input: Readable): number {
  return (input as Readable & { bytesRead?: number }).bytesRead ?? 0
}

function settled (counts: Readonly<ImportCounts>): number {
  return counts.created + counts.unchanged + counts.replaced + counts.conflicts
}

function summaryDocument (result: ImportResult, seconds: number): Record<string, number> {
  return {
    ...result.counts,
    ...(result.stoppedAtLine === undefined ? {} : { stoppedAtLine: result.stoppedAtLine }),
    seconds: Math.round(seconds * 1000) / 1000
  }
}

function summaryText (name: string, result: ImportResult, seconds: number): string {
  const { lines, created, unchanged, replaced, conflicts, rejected } = result.counts
  const counts = `${created} created, ${unchanged} unchanged, ${replaced} replaced, ${counted(conflicts, 'conflict')}, ${rejected} rejected`
  const stopped = result.stoppedAtLine === undefined ? '' : `; stopped at line ${result.stoppedAtLine} (--on-conflict=fail): no line from it on was written`
  const nothing = created + replaced === 0 ? '; nothing changed' : ''
  return `imported ${name}: ${counted(lines, 'line')}: ${counts} in ${seconds.toFixed(1)} s${stopped}${nothing}\n`
}
