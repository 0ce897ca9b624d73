import { accessSync, constants, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import Database, { type SqliteDatabase } from './driver.js'
import { latestVersion, SchemaTooNewError } from '../migration.js'
import { sqliteMigrations } from './migrations.js'
import { StoreOpenError } from '../plant-store.js'

export interface SqliteConnectionOptions {
  /**
   * How long a write waits for another connection's lock before the request gets a 503. The wait blocks
   * the event loop (better-sqlite3 is synchronous), so it is short.
   */
  readonly busyTimeoutMs?: number
}

export const DEFAULT_BUSY_TIMEOUT_MS = 250

/** Opens (creating it and its folder if needed) and migrates the database file, with the durability settings. */
export function openSqliteDatabase (file: string, options: SqliteConnectionOptions = {}): SqliteDatabase {
  assertWritableFolder(file)
  let db
  try {
    db = new Database(file)
  } catch (error) {
    throw new StoreOpenError(`DATABASE_URL: cannot open the SQLite database ${file}: ${(error as Error).message}`, { cause: error })
  }
  try {
    applySettings(db, options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS)
    migrate(db)
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

/**
 * The writer thread's connection to a database `openSqliteDatabase` has opened and migrated. Durability
 * rests on its settings: it refuses to write at all without them.
 */
export function openWriterConnection (file: string, busyTimeoutMs: number): SqliteDatabase {
  const db = new Database(file)
  applySettings(db, busyTimeoutMs)
  if (db.pragma('journal_mode', { simple: true }) !== 'wal' || Number(db.pragma('synchronous', { simple: true })) !== SYNCHRONOUS_FULL) {
    throw new Error('the SQLite writer could not set journal_mode=WAL and synchronous=FULL')
  }
  return db
}

const SYNCHRONOUS_FULL = 2

/** WAL, and synchronous=FULL so that a commit has reached the disk when it returns; integers as `bigint`. */
function applySettings (db: SqliteDatabase, busyTimeoutMs: number): void {
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.pragma(`busy_timeout = ${busyTimeoutMs}`)
  db.defaultSafeIntegers(true)
}

/**
 * SQLite in WAL mode creates files next to the database, so its folder must be writable: say so plainly
 * instead of SQLite's "unable to open database file" (a container started without a writable /data).
 */
function assertWritableFolder (file: string): void {
  const folder = dirname(file)
  const problem = (error: unknown) => new StoreOpenError(
    `DATABASE_URL: cannot use the SQLite database ${file}: the folder ${folder} cannot be created or written by this process ` +
    `(uid ${process.getuid?.() ?? 'unknown'}; ${(error as NodeJS.ErrnoException).code ?? String(error)})`, { cause: error })
  try {
    mkdirSync(folder, { recursive: true })
    accessSync(folder, constants.W_OK | constants.X_OK)
  } catch (error) {
    throw problem(error)
  }
}

/**
 * Brings the database up to this release's schema, each version in a transaction of its own (a backfill
 * in one per batch), so that an interrupted upgrade goes on from where it stopped; throws
 * SchemaTooNewError for a schema newer than this release knows. `plantstore restore` migrates a
 * backup's copy with it too.
 */
export function migrate (db: SqliteDatabase): void {
  const known = latestVersion(sqliteMigrations)
  const version = () => Number(db.pragma('user_version', { simple: true }))
  const found = version()
  if (found > known) throw new SchemaTooNewError(found, known)
  const advanceTo = (migrated: number) => { if (migrated > version()) db.pragma(`user_version = ${migrated}`) }
  for (const migration of sqliteMigrations) {
    if (migration.version <= version()) continue
    if ('sql' in migration) {
      db.transaction(() => {
        // Another process may have applied it meanwhile.
        if (migration.version <= version()) return
        db.exec(migration.sql)
        advanceTo(migration.version)
      }).immediate()
    } else {
      while (db.transaction(() => migration.backfillBatch(db)).immediate() > 0);
      db.transaction(() => { advanceTo(migration.version) }).immediate()
    }
  }
}
