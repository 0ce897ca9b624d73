import { existsSync } from 'node:fs'
import { removeSidecars } from './database-file.js'
import Database, { SqliteError, type SqliteDatabase } from './driver.js'

/**
 * Runs `rename`, which gives a complete file the name of the SQLite store `storePath`, which no process
 * may have open: one that does (a running service) is refused and left as it was.
 *
 * Leaving WAL mode needs every other connection to the store gone, so that is the test: with none,
 * SQLite takes the store out of WAL mode; then an exclusive lock is held on it until the new file has
 * its name, so no process can begin to use the old one meanwhile. The store's `-wal`, `-shm` and
 * `-journal` files are removed before the rename: SQLite would apply an old write-ahead log or journal
 * to the new file as if it were the old one's.
 */
export function replaceUnusedStore (storePath: string, rename: () => void): void {
  const lock = existsSync(storePath) ? lockUnusedStore(storePath) : undefined
  try {
    removeSidecars(storePath)
    rename()
  } finally {
    lock?.close()
  }
}

/** An exclusive lock on the store; undefined for a file that is not a database, which nothing can be serving. */
function lockUnusedStore (storePath: string): SqliteDatabase | undefined {
  let db: SqliteDatabase | undefined
  try {
    db = new Database(storePath, { fileMustExist: true, timeout: 0 })
    if (db.pragma('journal_mode = DELETE', { simple: true }) !== 'delete') throw inUse(storePath)
    db.exec('BEGIN EXCLUSIVE')
    return db
  } catch (error) {
    db?.close()
    const code = error instanceof SqliteError ? error.code : ''
    if (code === 'SQLITE_NOTADB') return undefined
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) throw inUse(storePath, error)
    if (error instanceof SqliteError) throw new Error(`cannot restore into ${storePath}: ${error.message}`, { cause: error })
    throw error
  }
}

function inUse (storePath: string, cause?: unknown): Error {
  return new Error(`cannot restore into ${storePath}: another process has it open (a running service?); stop it first`, { cause })
}
