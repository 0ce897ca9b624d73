import { closeSync, openSync, writeSync } from 'node:fs'
import type { Config } from '../config.js'
import { counted } from '../counted.js'
import { TAG_RULE } from '../schemas/plants.js'
import { plantTextViolation } from '../schemas/kinds.js'
import { AtomicFile } from '../transfer/atomic-file.js'
import { exportPlants, plantsInChunk } from '../transfer/export.js'
import { defineCommand } from './command.js'
import { withCommandStore } from './command-store.js'
import { unlessInterrupted } from './interruptions.js'
import { ProgressLine } from './progress-line.js'
import { DATA_EXIT_CODES, ENVIRONMENT } from './usage.js'

export const EXPORT_USAGE = `Usage: plantstore export [--tag TAG] [--out FILE [--force]]

Writes every plant of the store of DATABASE_URL (any backend) as NDJSON: one JSON document per line, as
GET /plants/{id} shows it, ordered by id, read in pages in constant memory. On a terminal, stderr shows
the progress. GET /admin/export serves the same over HTTP.

Options:
  --tag TAG      only the plants with exactly this tag
  --out FILE     write to FILE (through a temporary name, renamed when complete) instead of stdout
  --force        replace FILE if it exists
  -h, --help     show this help

${ENVIRONMENT}
${DATA_EXIT_CODES}`

interface ExportInvocation {
  readonly command: 'export'
  readonly tag?: string
  /** The file to write; standard output when absent. */
  readonly out?: string
  readonly force: boolean
}

/**
 * `plantstore export`: the store's plants as NDJSON to stdout or, through a temporary name, to `--out`.
 * A summary line goes to stderr when writing a file (stdout is the data otherwise).
 */
export const exportCommand = defineCommand<ExportInvocation>({
  name: 'export',
  summary: 'write the plants as NDJSON',
  usage: EXPORT_USAGE,
  parse ({ options }) {
    const parsed = options({ tag: { type: 'string' }, out: { type: 'string' }, force: { type: 'boolean' } }, false)
    if (parsed.command === 'help') return parsed
    const { fail, text } = parsed
    const tag = text('tag')
    const out = text('out')
    const force = parsed.values.force === true
    if (tag !== undefined) {
      const violation = plantTextViolation(tag, TAG_RULE)
      if (violation !== undefined) throw fail(`--tag ${violation}`)
    }
    if (out === '') throw fail('--out needs a file name')
    if (force && out === undefined) throw fail('--force is for --out FILE: it lets the export replace that file')
    return { command: 'export', ...(tag === undefined ? {} : { tag }), ...(out === undefined ? {} : { out }), force }
  },
  run: exportToOutput
})

async function exportToOutput (invocation: ExportInvocation, config: Config): Promise<number> {
  // Refused before the store is opened: an existing file is never touched.
  const file = invocation.out === undefined ? undefined : new AtomicFile(invocation.out, invocation.force, 'export')
  return withCommandStore(config, 'a memory store lives only inside the running service, so export cannot reach it; use GET /admin/export with an admin token', async (store) => {
    const chunks = exportPlants(store, invocation.tag === undefined ? {} : { tag: invocation.tag })
    const progress = new ProgressLine('exported')
    const startedAt = performance.now()
    let plants = 0
    const countedChunks = async function * (): AsyncGenerator<string> {
      for await (const chunk of chunks) {
        plants += plantsInChunk(chunk)
        progress.update(plants)
        yield chunk
      }
    }
    if (file === undefined) {
      await writeToStandardOutput(countedChunks())
      progress.finish()
      return 0
    }
    await unlessInterrupted(() => file.abandon(), async () => {
      try {
        await writeToFile(file.temporaryPath, countedChunks())
        file.commit()
      } catch (error) {
        file.abandon()
        throw describeWriteError(error, file.path)
      }
    })
    progress.finish()
    const seconds = (performance.now() - startedAt) / 1000
    process.stderr.write(`exported ${counted(plants, 'plant')} to ${file.path} in ${seconds.toFixed(1)} s\n`)
    return 0
  })
}

async function writeToFile (path: string, chunks: AsyncIterable<string>): Promise<void> {
  const descriptor = openSync(path, 'wx')
  try {
    for await (const chunk of chunks) {
      writeSync(descriptor, chunk)
      // A SQLite page is read without waiting for anything: give signals (Ctrl-C) their turn between pages.
      await new Promise((resolve) => setImmediate(resolve))
    }
  } finally {
    closeSync(descriptor)
  }
}

/** Writes with backpressure; a closed stdout (`| head`) ends the export as a failure, the store untouched. */
async function writeToStandardOutput (chunks: AsyncIterable<string>): Promise<void> {
  const stdout = process.stdout
  let failure: Error | undefined
  const onError = (error: Error): void => { failure = error }
  stdout.on('error', onError)
  try {
    for await (const chunk of chunks) {
      if (failure !== undefined) break
      if (!stdout.write(chunk)) {
        await new Promise<void>((resolve) => {
          const done = (): void => { stdout.off('drain', done); stdout.off('error', done); resolve() }
          stdout.once('drain', done)
          stdout.once('error', done)
        })
      }
    }
    if (failure !== undefined) {
      throw new Error(`standard output closed before the export ended (${(failure as NodeJS.ErrnoException).code ?? failure.message})`)
    }
  } finally {
    stdout.off('error', onError)
  }
}

function describeWriteError (error: unknown, path: string): Error {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ENOSPC') return new Error(`the disk is full: the export to ${path} was not written`, { cause: error })
  if (code === 'EACCES' || code === 'EROFS' || code === 'ENOENT') {
    return new Error(`cannot write the export to ${path} (${code}); nothing was written`, { cause: error })
  }
  return error instanceof Error ? error : new Error(String(error))
}
