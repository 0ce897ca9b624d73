import pg from 'pg'
import { latestVersion, SchemaTooNewError } from '../migration.js'
import { ADVISORY_LOCK_KEYS } from './advisory-locks.js'
import { postgresMigrations } from './migrations.js'
import { StoreUnavailableError, type PoolUsage } from '../plant-store.js'
import { createPostgresPool, type PostgresPoolOptions } from './pool.js'
import { asStoreError, checkWritable, inTransaction } from './transactions.js'

export { BIGINT_AS_BIGINT } from './pool.js'
/** The pool's size, timeouts and pooling mode (pool.ts). */
export type PostgresConnectionOptions = PostgresPoolOptions

/**
 * The pool as the sub-stores use it. Every statement and transaction first brings the schema up to
 * date (once), and an outage reaches the caller as a StoreUnavailableError.
 */
export interface PostgresConnection {
  query<Row extends pg.QueryResultRow> (config: pg.QueryConfig): Promise<pg.QueryResult<Row>>
  /** Runs a query object that keeps what its rows hold itself (plant-documents-query.ts), as `query` runs a config. */
  submit (query: pg.Query): Promise<void>
  /** `work` in one transaction on one pooled client, opened with `begin`. */
  transaction<T> (work: (client: pg.PoolClient) => Promise<T>, begin?: string): Promise<T>
  /**
   * `work` in one transaction, run again (three runs at most) while it fails on a serialization failure
   * or a deadlock. It rejects only with a StoreUnavailableError: nothing of it committed, so whatever
   * asked for it may be retried as it is (a 503). `what` names it in the error's message.
   */
  retriedTransaction<T> (what: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T>
  ping (): Promise<void>
  /** Resolves when the server takes writes: reachable, a primary, not read-only. A connection that finds it read-only is dropped. */
  checkWritable (): Promise<void>
  poolUsage (): PoolUsage
  /** How long a statement waits for a connection (new or from the pool) before it fails with a StoreUnavailableError. */
  readonly connectTimeoutMs: number
  /** Whether a connection may stay in `LISTEN` (not behind a pooler in transaction mode). */
  readonly canListen: boolean
  close (): Promise<void>
}

const MIGRATIONS_TABLE = `
  CREATE TABLE IF NOT EXISTS plantstore_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
  )`
/** SQLSTATE 40001 (serialization failure) and 40P01 (deadlock): the whole transaction may simply run again. */
const RETRYABLE_SQLSTATE = /^40(001|P01)$/
const TRANSACTION_ATTEMPTS = 3

/**
 * A node-postgres pool whose BIGINT columns are parsed to `bigint`, never through a double.
 *
 * It opens even while the database is down: the schema is brought up to date by the first operation
 * that reaches the database, and every operation until then is a StoreUnavailableError.
 */
export async function openPostgresConnection (connectionString: string, options: PostgresConnectionOptions): Promise<PostgresConnection> {
  const { pool, beginBounded, boundsLoneStatements, canListen } = createPostgresPool(connectionString, options)
  const boundedBegin = beginBounded('BEGIN')
  // An idle connection that the server drops emits here; the pool replaces it, and the next query
  // that cannot get a connection reports the outage to its own request.
  pool.on('error', () => {})

  let schemaReady: Promise<void> | undefined
  const ensureSchema = (): Promise<void> => {
    schemaReady ??= migrate(pool, boundedBegin).catch((error: unknown) => {
      const failure = asStoreError(error)
      if (failure instanceof StoreUnavailableError) schemaReady = undefined
      throw failure
    })
    return schemaReady
  }

  const connection: PostgresConnection = {
    async query<Row extends pg.QueryResultRow> (config: pg.QueryConfig) {
      await ensureSchema()
      try {
        // Behind a pooler in transaction mode a statement is bounded only inside a transaction that sets it.
        return boundsLoneStatements
          ? await inTransaction(pool, (client) => client.query<Row>(config), boundedBegin)
          : await pool.query<Row>(config)
      } catch (error) {
        throw asStoreError(error)
      }
    },
    async submit (query) {
      await ensureSchema()
      try {
        await (boundsLoneStatements
          ? inTransaction(pool, (client) => submitted(client, query), boundedBegin)
          : submitted(pool, query))
      } catch (error) {
        throw asStoreError(error)
      }
    },
    async transaction (work, begin) {
      await ensureSchema()
      try {
        return await inTransaction(pool, work, beginBounded(begin ?? 'BEGIN'))
      } catch (error) {
        throw asStoreError(error)
      }
    },
    async retriedTransaction (what, work) {
      await ensureSchema()
      for (let attempt = 1; ; attempt++) {
        try {
          return await inTransaction(pool, work, boundedBegin)
        } catch (error) {
          const code = (error as { code?: unknown }).code
          if (attempt === TRANSACTION_ATTEMPTS || typeof code !== 'string' || !RETRYABLE_SQLSTATE.test(code)) {
            const failure = asStoreError(error)
            throw failure instanceof StoreUnavailableError
              ? failure
              : new StoreUnavailableError(`the ${what} did not commit (${(error as Error).message})`, { cause: error })
          }
        }
      }
    },
    async ping () {
      try {
        await connection.query({ text: 'SELECT 1' })
      } catch (error) {
        throw error instanceof StoreUnavailableError
          ? error
          : new StoreUnavailableError(`PostgreSQL cannot be queried (${(error as Error).message})`, { cause: error })
      }
    },
    async checkWritable () {
      await ensureSchema()
      await checkWritable(pool)
    },
    canListen,
    connectTimeoutMs: options.connectTimeoutMs,
    poolUsage: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: options.poolSize }),
    close: () => pool.end()
  }

  try {
    await ensureSchema()
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) {
      await pool.end()
      throw error
    }
  }
  return connection
}

/**
 * Runs `query` on `queryable` and resolves when it has completed. The callback form, whose callback the
 * pool also gets when it cannot lend a connection: a query object handed over alone reports only through
 * events the pool never sees.
 */
function submitted (queryable: pg.Pool | pg.ClientBase, query: pg.Query): Promise<void> {
  return new Promise((resolve, reject) => {
    const withCallback = queryable.query as unknown as (this: typeof queryable, query: pg.Query, callback: (error: Error | undefined) => void) => void
    withCallback.call(queryable, query, (error) => { if (error === undefined || error === null) resolve(); else reject(error) })
  })
}

/** The longest time-out a timer takes (about 24.8 days): a client-side time-out that never ends a migration. */
const UNBOUNDED_MS = 2 ** 31 - 1

/**
 * Applies the migrations this database has not seen, each version in a transaction of its own (a
 * backfill in one per batch) under an advisory lock that other starting instances wait for, so that an
 * interrupted upgrade goes on from where it stopped.
 */
async function migrate (pool: pg.Pool, begin: string): Promise<void> {
  const known = latestVersion(postgresMigrations)
  /** The version applied, read under the lock, which the transaction holds until it ends. */
  const lockedVersion = async (client: pg.PoolClient): Promise<number> => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [ADVISORY_LOCK_KEYS.migration])
    await client.query(MIGRATIONS_TABLE)
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM plantstore_migrations')
    const current = rows[0]?.version ?? 0
    if (current > known) throw new SchemaTooNewError(current, known)
    return current
  }
  const record = (client: pg.PoolClient, version: number, name: string) =>
    client.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [version, name])
  const applied = await inTransaction(pool, lockedVersion, begin)
  for (const migration of postgresMigrations) {
    if (migration.version <= applied) continue
    if ('sql' in migration) {
      // A version's DDL (an index build on a large table, say) takes as long as it takes: neither the
      // statement timeout of requests nor the client's time-out above it bounds it.
      await inTransaction(pool, async (client) => {
        if (migration.version <= await lockedVersion(client)) return
        // (node-postgres reads a query's own query_timeout; its types do not list it.)
        const unbounded: pg.QueryConfig & { query_timeout: number } = { text: migration.sql, query_timeout: UNBOUNDED_MS }
        await client.query(unbounded)
        await record(client, migration.version, migration.name)
      }, `${begin}; SET LOCAL statement_timeout = 0`)
      continue
    }
    const batch = (client: pg.PoolClient) => lockedVersion(client).then((current) => current >= migration.version ? 0 : migration.backfillBatch(client))
    while (await inTransaction(pool, batch, begin) > 0);
    await inTransaction(pool, async (client) => {
      if (migration.version > await lockedVersion(client)) await record(client, migration.version, migration.name)
    }, begin)
  }
}
