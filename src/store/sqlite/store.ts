import { statfs } from 'node:fs/promises'
import { dirname } from 'node:path'
import { DEFAULT_BUSY_TIMEOUT_MS, openSqliteDatabase, type SqliteConnectionOptions } from './connection.js'
import { sqlitePlantReads } from './plants.js'
import { sqliteTokenStore } from './tokens.js'
import { sqliteWebhookStore } from './webhooks.js'
import { sqliteChangeLog } from './changes.js'
import { sqliteGroupCommit } from './write-batch.js'
import { SqliteWriter } from './writer.js'
import { SearchIndexUpkeep } from './search-upkeep.js'
import { groupCommittedWrites } from '../group-commit.js'
import { StoreUnavailableError, type PlantStore } from '../plant-store.js'
import { ChangeSignal } from '../change-log.js'

/**
 * Below this much free space on the database's file system the next write batch (its WAL frames) may
 * not fit: readiness reports the store out of space before writes start failing with SQLITE_FULL.
 */
export const MINIMUM_FREE_BYTES = 1024 * 1024
/** DATABASE_STATEMENT_TIMEOUT_MS's default. */
const DEFAULT_STATEMENT_TIMEOUT_MS = 5000

export interface SqliteOptions extends SqliteConnectionOptions {
  /** How long a search or a count may read before it ends with a StoreUnavailableError (DATABASE_STATEMENT_TIMEOUT_MS). */
  readonly statementTimeoutMs?: number
  /** Called after each committed write batch with its size: for tests and metrics. */
  readonly onBatchCommitted?: (size: number) => void
  /** Called after each batch of single-plant reads with its size: for tests and metrics. */
  readonly onReadBatch?: (size: number) => void
}

/**
 * The embedded default store: one SQLite file in WAL mode with synchronous=FULL, so a commit has
 * reached the disk (fsync of the WAL) before `create` or `delete` resolves. Plant writes and webhook
 * bookkeeping are committed by a writer thread with its own connection (writer.ts, writer-thread.ts),
 * group-committed (write-batch.ts); reads (plants.ts, webhooks.ts) and the rare token writes
 * (tokens.ts) use this thread's connection (connection.ts). Integers are read as `bigint`.
 */
export function openSqliteStore (file: string, options: SqliteOptions = {}): PlantStore {
  const db = openSqliteDatabase(file, options)
  // Reads a page of the plants table, so a missing or unreadable file fails readiness.
  const probe = db.prepare('SELECT count(*) FROM (SELECT 1 FROM plants LIMIT 1)')
  const writer = new SqliteWriter({ file, busyTimeoutMs: options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS })
  const searchIndex = new SearchIndexUpkeep(writer)
  const committed = new ChangeSignal()
  const writes = sqliteGroupCommit(writer, (size) => {
    searchIndex.written(size)
    committed.notify()
    options.onBatchCommitted?.(size)
  })
  const { close: closeReads, ...reads } = sqlitePlantReads(db, file, {
    statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
    onReadBatch: options.onReadBatch
  })
  const ping = async (): Promise<void> => {
    try {
      probe.get()
    } catch (error) {
      throw new StoreUnavailableError(`SQLite cannot be read (${(error as Error).message})`, { cause: error })
    }
  }

  return {
    backend: 'sqlite',
    ...groupCommittedWrites(writes),
    ...reads,
    tokens: sqliteTokenStore(db),
    webhooks: sqliteWebhookStore(db, writer),
    changes: sqliteChangeLog(db, writer, committed),
    observe (observer) {
      writes.observer = observer
    },
    ping,
    async checkWritable () {
      await ping()
      let free: number
      try {
        const space = await statfs(dirname(file))
        free = space.bavail * space.bsize
      } catch (error) {
        throw new StoreUnavailableError(`SQLite's folder cannot be examined (${(error as Error).message})`, { cause: error })
      }
      if (free < MINIMUM_FREE_BYTES) throw new StoreUnavailableError(`SQLite takes no writes: ${free} bytes free next to ${file}`)
    },
    async close () {
      await closeReads()
      await writes.whenIdle()
      await searchIndex.close()
      await writer.close()
      if (db.open) db.close()
    }
  }
}
