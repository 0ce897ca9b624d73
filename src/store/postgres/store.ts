import { groupCommittedWrites } from '../group-commit.js'
import type { PlantStore } from '../plant-store.js'
import { openPostgresConnection, type PostgresConnectionOptions } from './connection.js'
import { postgresPlantReads } from './plants.js'
import { postgresTokenStore } from './tokens.js'
import { TokenChangeListener } from './token-changes.js'
import { postgresWebhookStore } from './webhooks.js'
import { postgresChangeLog } from './changes.js'
import { ChannelListener } from './channel-listener.js'
import { CHANGES_CHANNEL, postgresGroupCommit } from './write-batch.js'
import { ChangeSignal } from '../change-log.js'
import { SearchUpkeep, type StoreLog } from './search-index.js'

export interface PostgresOptions extends PostgresConnectionOptions {
  /** Called after each committed write batch with its size: for tests and metrics. */
  readonly onBatchCommitted?: (size: number) => void
  /** Called after each batch of single-plant reads with its size: for tests and metrics. */
  readonly onReadBatch?: (size: number) => void
  /**
   * Set by the service (not by a command or a test): it keeps the search index (search-index.ts) and
   * reports that upkeep here.
   */
  readonly upkeepLog?: StoreLog
}

/**
 * PostgreSQL through a node-postgres pool (connection.ts), one part a file: plant reads (plants.ts),
 * group-committed plant writes (write-batch.ts), access tokens (tokens.ts, token-changes.ts) and
 * webhooks (webhooks.ts).
 *
 * The store opens even while the database is down: the schema is brought up to date by the first
 * operation that reaches the database, and every operation until then is a StoreUnavailableError.
 */
export async function openPostgresStore (connectionString: string, options: PostgresOptions): Promise<PlantStore> {
  const connection = await openPostgresConnection(connectionString, options)
  const committed = new ChangeSignal()
  const writes = postgresGroupCommit(connection, (size) => {
    committed.notify()
    options.onBatchCommitted?.(size)
  })
  // Behind a pooler in transaction mode no connection can stay in LISTEN: the revision poll alone follows changes.
  const tokenChanges = connection.canListen ? new TokenChangeListener(connectionString, options.connectTimeoutMs) : undefined
  const changeNotifications = connection.canListen
    ? new ChannelListener(connectionString, options.connectTimeoutMs, CHANGES_CHANNEL, 'plantstore-change-listener')
    : undefined
  const watchChanges = (listener: () => void) => {
    const unwatchCommits = committed.add(listener)
    const unwatchNotifications = changeNotifications?.add(listener)
    return () => {
      unwatchCommits()
      unwatchNotifications?.()
    }
  }
  // ...nor a session build an index concurrently.
  const searchUpkeep = options.upkeepLog === undefined ? undefined : new SearchUpkeep(connectionString, connection, options.upkeepLog, connection.canListen)
  searchUpkeep?.start()
  return {
    backend: 'postgres',
    ...groupCommittedWrites(writes),
    ...postgresPlantReads(connection, options.onReadBatch),
    tokens: postgresTokenStore(connection, tokenChanges),
    webhooks: postgresWebhookStore(connection),
    changes: postgresChangeLog(connection, watchChanges),
    observe (observer) {
      writes.observer = observer
    },
    poolUsage: () => connection.poolUsage(),
    ping: () => connection.ping(),
    checkWritable: () => connection.checkWritable(),
    async close () {
      await writes.whenIdle()
      await searchUpkeep?.close()
      await tokenChanges?.close()
      await changeNotifications?.close()
      await connection.close()
    }
  }
}
