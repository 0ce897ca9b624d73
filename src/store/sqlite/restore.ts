import { constants, copyFileSync } from 'node:fs'
import { migrate } from './connection.js'
import { checkSqliteFile, isDiskFull, type SqliteFileCheck } from './database-file.js'
import Database, { SqliteError, type SqliteDatabase } from './driver.js'
import { contentsOf, schemaVersion, storeProblem } from './store-contents.js'
import type { PreparedRestore } from '../store-transfer.js'

/**
 * Why `backupPath` cannot be restored, judged from its size and header alone; undefined when it looks
 * like a whole SQLite database.
 */
export function backupFileProblem (backupPath: string): string | undefined {
  const check = checkSqliteFile(backupPath)
  return check.kind === 'database' ? undefined : `cannot restore ${backupPath}: ${fileProblem(check)}`
}

/**
 * Makes at `copyPath` (which must not exist) the store that restoring the backup gives: the backup's
 * bytes, checked (`PRAGMA quick_check`, a plantstore store of a schema version this release knows),
 * migrated to this release's schema, in rollback-journal mode and written through to the disk. The
 * backup file itself is only read. Throws, naming the backup, when it cannot be restored.
 */
export function prepareRestore (backupPath: string, copyPath: string): PreparedRestore {
  const problem = backupFileProblem(backupPath)
  if (problem !== undefined) throw new Error(problem)
  copyFileSync(backupPath, copyPath, constants.COPYFILE_EXCL)
  let db: SqliteDatabase | undefined
  try {
    db = new Database(copyPath, { fileMustExist: true })
    db.pragma('journal_mode = DELETE')
    const damage = quickCheckProblem(db)
    if (damage !== undefined) throw new Error(`cannot restore ${backupPath}: it is damaged (PRAGMA quick_check: ${damage})`)
    const notAStore = storeProblem(db)
    if (notAStore !== undefined) throw new Error(`cannot restore ${backupPath}: ${notAStore}`)
    const backupVersion = schemaVersion(db)
    migrate(db)
    skipPastLostChanges(db)
    return { contents: contentsOf(db), backupVersion }
  } catch (error) {
    // SQLite's words for a file it cannot read (SQLITE_CORRUPT, SQLITE_NOTADB), with the backup's path.
    if (error instanceof SqliteError && !isDiskFull(error)) {
      throw new Error(`cannot restore ${backupPath}: it is damaged (${error.message})`, { cause: error })
    }
    throw error
  } finally {
    db?.close()
  }
}

/**
 * How far a restore moves the change log's head: more changes than a store makes between a backup and its
 * restore, so no `seq` a client saw before the restore is ever given to another change.
 */
export const RESTORE_SEQ_GAP = 2n ** 32n

/**
 * A restore goes back in time: changes made after the backup were read by clients under numbers the
 * restored log would otherwise give to other changes, and a client resuming from one would miss those
 * silently. So the head moves RESTORE_SEQ_GAP up and every resume point below it is expired (410: read the
 * plants again), as etcd marks its revisions compacted on restore. The kept changes stay in histories.
 */
function skipPastLostChanges (db: SqliteDatabase): void {
  db.prepare('UPDATE change_log SET head = head + ?, pruned_through = head + ? WHERE singleton = 1').run(RESTORE_SEQ_GAP, RESTORE_SEQ_GAP)
}

/** The first problem `PRAGMA quick_check` finds (and whether there are more); undefined for `ok`. */
function quickCheckProblem (db: SqliteDatabase): string | undefined {
  const rows = db.pragma('quick_check') as Array<{ quick_check: string }>
  // A row may hold several lines, the first naming the database ("*** in database main ***").
  const problems = rows.flatMap((row) => row.quick_check.split('\n')).filter((line) => line !== '' && !line.startsWith('***'))
  const [first] = problems
  if (first === undefined || first === 'ok') return undefined
  return problems.length === 1 ? first : `${first}; and more`
}

function fileProblem (check: Exclude<SqliteFileCheck, { kind: 'database' }>): string {
  switch (check.kind) {
    case 'missing': return 'it does not exist'
    case 'not a file': return 'it is not a file'
    case 'empty': return 'it is empty, not a plantstore backup'
    case 'not sqlite': return 'it is not a SQLite database, so not a plantstore backup'
    case 'truncated': return `it is truncated: its header says ${check.expected} bytes, it has ${check.bytes}`
  }
}
