import { checkSqliteFile, isDiskFull, type SqliteFileCheck } from './database-file.js'
import Database, { SqliteError } from './driver.js'
import { contentsOf, storeProblem } from './store-contents.js'
import type { StoreContents } from '../store-transfer.js'

/** How much one step of the backup copies: a few milliseconds of work. */
const BYTES_PER_STEP = 4 * 1024 * 1024
/** The longest pause between two steps, so that Ctrl-C is acted on within a moment. */
const LONGEST_PAUSE_MS = 200

/**
 * Copies the SQLite store at `storePath` into `copyPath`, a file that does not exist yet, as one
 * consistent snapshot, while a service keeps reading and writing the store through its own connections:
 * SQLite's online backup API on a read-only connection, which never writes the store's content (it
 * may create the empty `-wal` and `-shm` files any reader of a WAL store does).
 *
 * The snapshot is a read transaction that this connection begins before the copy and holds across all
 * its steps, so it holds every write committed (and so acknowledged) before the backup began, and
 * another connection's commits do not restart the copy, as they would a backup stepped without one.
 * Between steps the backup pauses as long as the step took, leaving the service at least half of the
 * time; the command also runs at a lower CPU priority (see src/cli/backup.ts).
 *
 * The copy is left in rollback-journal mode, one file complete by itself; its contents are counted from
 * the copy. Throws, with the store's path in the message, when the store is missing, not a plantstore
 * store or of a newer schema; SQLite's SQLITE_FULL when the disk fills.
 */
export async function backUpSqliteStore (storePath: string, copyPath: string): Promise<StoreContents> {
  const check = checkSqliteFile(storePath)
  if (check.kind !== 'database') throw new Error(`cannot back up ${storePath}: ${sourceProblem(check)}`)
  try {
    await copySnapshot(storePath, copyPath, check.pageSize)
  } catch (error) {
    // SQLite's words for a store it cannot read (damaged, unreadable), with the store's path.
    if (error instanceof SqliteError && !isDiskFull(error)) throw new Error(`cannot back up ${storePath}: ${error.message}`, { cause: error })
    throw error
  }
  const copy = new Database(copyPath, { fileMustExist: true })
  try {
    copy.pragma('journal_mode = DELETE')
    return contentsOf(copy)
  } finally {
    copy.close()
  }
}

async function copySnapshot (storePath: string, copyPath: string, pageSize: number): Promise<void> {
  const source = new Database(storePath, { readonly: true, fileMustExist: true })
  try {
    source.exec('BEGIN')
    const problem = storeProblem(source)
    if (problem !== undefined) throw new Error(`cannot back up ${storePath}: ${problem}`)
    await source.backup(copyPath, { progress: pacedSteps(pageSize) })
    source.exec('COMMIT')
  } finally {
    source.close()
  }
}

function sourceProblem (check: Exclude<SqliteFileCheck, { kind: 'database' }>): string {
  switch (check.kind) {
    case 'missing': return 'it does not exist (DATABASE_URL names it); there is nothing to back up'
    case 'not a file': return 'it is not a file'
    case 'empty': return 'it is empty, not a plantstore store'
    case 'not sqlite': return 'it is not a SQLite database, so not a plantstore store'
    case 'truncated': return `it is damaged: its header says ${check.expected} bytes, it has ${check.bytes}`
  }
}

/**
 * The backup's progress callback: each step copies BYTES_PER_STEP, then the thread sleeps as long as
 * the step took (without using the CPU), so the backup takes at most half of the time of the core it
 * runs on and the service's writers keep most of their rate.
 */
function pacedSteps (pageSize: number): () => number {
  const pages = Math.max(1, Math.floor(BYTES_PER_STEP / pageSize))
  const sleeper = new Int32Array(new SharedArrayBuffer(4))
  let stepStarted = performance.now()
  return () => {
    Atomics.wait(sleeper, 0, 0, Math.min(LONGEST_PAUSE_MS, performance.now() - stepStarted))
    stepStarted = performance.now()
    return pages
  }
}
