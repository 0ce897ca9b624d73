import { spawn, type ChildProcess } from 'node:child_process'
import { createHash } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { expect, onTestFinished } from 'vitest'
import { openStore, sqliteFilePath } from '../../src/store/open-store.js'
import { openSqliteDatabase } from '../../src/store/sqlite/connection.js'
import Database from '../../src/store/sqlite/driver.js'
import { exportPlants } from '../../src/transfer/export.js'
import { TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import { appendCapturedLog } from '../helpers/log-capture.js'

/** What `plantstore copy` and the other commands are run as: `node bin/plantstore.js …`, dist/ built by the global set-up. */
const CLI = fileURLToPath(new URL('../../bin/plantstore.js', import.meta.url))

export interface Run { readonly code: number | null, readonly signal: NodeJS.Signals | null, readonly stdout: string, readonly stderr: string }

export interface RunningCli {
  readonly child: ChildProcess
  readonly done: Promise<Run>
}

/** Starts the CLI with only PATH and `env`, in `cwd`; killed by its PID when the test ends if it still runs. */
export function startCli (args: readonly string[], cwd: string, env: Record<string, string> = {}): RunningCli {
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const done = new Promise<Run>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => {
      appendCapturedLog(stderr)
      resolve({ code, signal, stdout, stderr })
    })
  })
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid as number, 'SIGKILL')
      await done
    }
  })
  return { child, done }
}

export function cli (args: readonly string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  return startCli(args, cwd, env).done
}

/** `plantstore copy --from … --to … [more]`. */
export function copy (from: string, to: string, cwd: string, ...more: string[]): Promise<Run> {
  return cli(['copy', '--from', from, '--to', to, ...more], cwd)
}

/**
 * The summary line of a successful copy, its time (milliseconds under a second, without a rate) and rate
 * matched loosely; `rest` follows the counts, then `pattern` (a regular expression's source).
 */
export function summaryLine (copied: CopiedCounts, from: string, to: string, rest = '', pattern = ''): RegExp {
  const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
  return new RegExp(`^copied ${escaped(from)} to ${escaped(to)} in (\\d{1,3} ms|\\d+\\.\\d s( \\(\\d+ plants/s\\))?): ${escaped(counts(copied) + rest)}${pattern}\\n$`)
}

export interface CopiedCounts {
  readonly tokens?: number
  readonly subscriptions?: number
  readonly plants?: number
  readonly events?: number
  readonly attempts?: number
  readonly changes?: number
}

/** `2 access tokens, 0 webhook subscriptions, 1 plant, …`, as a copy's summary counts the rows of each table. */
export function counts ({ tokens = 0, subscriptions = 0, plants = 0, events = 0, attempts = 0, changes = 0 }: CopiedCounts): string {
  const counted = (count: number, one: string) => `${count} ${one}${count === 1 ? '' : 's'}`
  return [counted(tokens, 'access token'), counted(subscriptions, 'webhook subscription'), counted(plants, 'plant'),
    counted(events, 'webhook event'), counted(attempts, 'delivery attempt'), counted(changes, 'change')].join(', ')
}

/** A PostgreSQL URL as copy's messages show it: without its password. */
export function shown (url: string): string {
  const parsed = new URL(url)
  return `postgres://${parsed.username}@${parsed.hostname}:${parsed.port}${parsed.pathname}`
}

/** The SHA-256 of the store's export (`exportPlants`, as `plantstore export` and GET /admin/export write it), and its lines. */
export async function exportDigest (databaseUrl: string): Promise<{ sha256: string, lines: number }> {
  const store = await openStore(databaseUrl, TEST_POSTGRES_OPTIONS)
  try {
    const hash = createHash('sha256')
    let lines = 0
    for await (const chunk of exportPlants(store)) {
      hash.update(chunk)
      lines += chunk.split('\n').length - 1
    }
    return { sha256: hash.digest('hex'), lines }
  } finally {
    await store.close()
  }
}

/**
 * Adds `count` plants to a SQLite store (made if need be) with plain SQL, quickly: ids spread over the
 * int64 range's both ends, names with non-ASCII text and quotes, tags absent, empty or set.
 */
export function addPlants (file: string, count: number, firstIndex = 0): void {
  const db = openSqliteDatabase(file)
  try {
    const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
    db.transaction(() => {
      for (let index = firstIndex; index < firstIndex + count; index++) {
        const id = index % 1000 === 7 ? 9007199254740993n + BigInt(index) : index % 1000 === 8 ? -BigInt(index) - 1n : BigInt(index) * 7n + 1n
        const tag = index % 3 === 0 ? null : index % 3 === 1 ? `tag ${index % 11}` : ''
        insert.run(id, index % 5 === 0 ? `Plante n°${index} "ça pousse" 🌿` : `plant ${index}`, tag)
      }
    })()
  } finally {
    db.close()
  }
}

/** Runs one statement on a PostgreSQL database. */
export async function postgresQuery<Row extends pg.QueryResultRow> (url: string, text: string, values: unknown[] = []): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<Row>(text, values)).rows
  } finally {
    await client.end()
  }
}

export interface MarkerState { readonly copying: string | null, readonly after_key: string | null, readonly finished_at: string | null }

/** The copy's marker in a target store, or undefined before the copy wrote it. */
export async function markerOf (databaseUrl: string): Promise<MarkerState | undefined> {
  if (databaseUrl.startsWith('sqlite:')) {
    const db = new Database(sqliteFilePath(databaseUrl), { readonly: true, fileMustExist: true })
    try {
      const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'store_copy'").get() !== undefined
      const row = exists ? db.prepare('SELECT copying, after_key, CAST(finished_at AS TEXT) AS finished_at FROM store_copy').get() : undefined
      return row as MarkerState | undefined
    } finally {
      db.close()
    }
  }
  const rows = await postgresQuery<MarkerState>(databaseUrl,
    'SELECT copying, after_key, finished_at::text AS finished_at FROM store_copy')
  return rows[0]
}

/** Polls until the target's marker shows the copy among the plants, past the first batch. */
export function untilCopyingPlants (databaseUrl: string, timeoutMs = 30_000): Promise<void> {
  return untilCopying(databaseUrl, 'plants', timeoutMs)
}

/** Polls until the target's marker shows the copy in `table`, past its first batch. */
export async function untilCopying (databaseUrl: string, table: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const marker = await markerOf(databaseUrl).catch(() => undefined)
    if (marker?.copying === table && marker.after_key !== null) return
    if (Date.now() > deadline) throw new Error(`the copy did not reach ${table} within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Expects a run to have failed with exactly one line on stderr, and nothing on stdout. */
export function expectFailure (run: Run, line: string | RegExp): void {
  expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' })
  if (typeof line === 'string') expect(run.stderr).toBe(`${line}\n`)
  else expect(run.stderr).toMatch(line)
}
