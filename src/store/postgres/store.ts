import pg from 'pg'
import { GroupCommit, groupCommittedWrites, RUN_AGAIN, type CommitBatch } from '../group-commit.js'
import { decideChange, idOf, type ChangeOperation, type CreateOperation, type WriteOperation, type WriteOutcome } from '../write-operations.js'
import { ReadBatch } from '../read-batch.js'
import { latestVersion, SchemaTooNewError } from '../migrations/migration.js'
import { postgresMigrations } from '../migrations/postgres.js'
import { scopesOfText, scopesText } from '../stored-scopes.js'
import type { AccessTokenRecord, AccessTokenStore, VerifiableAccessToken } from '../access-token-store.js'
import {
  ATTEMPT_COLUMNS, attemptPageOf, claimedDeliveries, deletedPlantBody, newEventId, OUTBOX_COLUMNS, SUBSCRIPTION_COLUMNS,
  SUBSCRIPTION_STATUS_COLUMNS, subscriptionOfRow, subscriptionStatusOfRow, type AttemptRow, type OutboxRow, type SettledAttempt,
  type SubscriptionRow, type SubscriptionStatusRow, type WebhookEventType, type WebhookStore
} from '../webhook-store.js'
import {
  outcomeOfMeeting, pageOf, plantJson, recordOfRow, samePlant, StoreUnavailableError,
  type PlantJson, type PlantRecord, type PlantRow, type PlantStore
} from '../plant-store.js'

export interface PostgresOptions {
  /** Called after each committed write batch with its size: for tests and metrics. */
  readonly onBatchCommitted?: (size: number) => void
  /** Called after each batch of single-plant reads with its size: for tests and metrics. */
  readonly onReadBatch?: (size: number) => void
  /** Connections this instance may hold; instances × poolSize must stay below max_connections. */
  readonly poolSize: number
  /** How long to wait for a connection (new or from the pool) before the request gets a 503. */
  readonly connectTimeoutMs: number
  /** Server-side statement_timeout; the client gives up a second later if the server is silent. */
  readonly statementTimeoutMs: number
}

const INT8_OID = 20
/** Serializes schema changes of concurrently starting instances (an arbitrary, fixed key). */
const MIGRATION_LOCK_KEY = '7243190561180520497'

const MIGRATIONS_TABLE = `
  CREATE TABLE IF NOT EXISTS plantstore_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
  )`

// Batch statements: one round trip for all of a batch's creates, one for the stored rows they met; for
// its changes, one that locks their rows, then one per kind of write they make. Ids are sorted so
// concurrent batches of several instances lock rows in one order.
/**
 * Whether any subscription is enabled, as the statement sees it: evaluated once per statement (an
 * InitPlan). The batch statements that return the rows a batch changes carry it, so a batch learns
 * whether its events need the outbox statement without a round trip of its own.
 */
const SUBSCRIBED = '(SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE disabled_at IS NULL)) AS subscribed'
const INSERT_PLANTS = {
  name: 'plantstore-insert-plants',
  text: `INSERT INTO plants (id, name, tag)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) ORDER BY 1
         ON CONFLICT (id) DO NOTHING RETURNING id, ${SUBSCRIBED}`
}
const SELECT_PLANTS = { name: 'plantstore-select-plants', text: 'SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])' }
const LOCK_PLANTS = {
  name: 'plantstore-lock-plants',
  text: `SELECT id, name, tag, ${SUBSCRIBED} FROM plants WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE OF plants`
}
const UPDATE_PLANTS = {
  name: 'plantstore-update-plants',
  text: `UPDATE plants SET name = changed.name, tag = changed.tag
         FROM unnest($1::bigint[], $2::text[], $3::text[]) AS changed (id, name, tag)
         WHERE plants.id = changed.id`
}
const DELETE_PLANTS = { name: 'plantstore-delete-plants', text: 'DELETE FROM plants WHERE id = ANY($1::bigint[])' }
const INSERT_OUTBOX = {
  name: 'plantstore-insert-outbox',
  text: `INSERT INTO webhook_outbox (subscription_id, event_id, event_type, plant_id, body, created_at, next_attempt_at)
         SELECT s.id, e.event_id, e.event_type, e.plant_id, e.body, $5, $5
         FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) WITH ORDINALITY AS e (event_id, event_type, plant_id, body, n)
         JOIN webhook_subscriptions s ON s.disabled_at IS NULL AND position(' ' || e.event_type || ' ' in ' ' || s.events || ' ') > 0
         ORDER BY e.n, s.id`
}
const MAX_BATCH_SIZE = 500
/** SQLSTATE 40001 (serialization failure) and 40P01 (deadlock): the whole batch may simply run again. */
const RETRYABLE_SQLSTATE = /^40(001|P01)$/
const BATCH_ATTEMPTS = 3
const MAX_READ_BATCH_SIZE = 500
/**
 * Reads return rows as arrays of text: the JSON document is built here from the id's decimal text (no
 * `bigint` is made for it) and the quoted name and tag. Built in SQL instead (`to_json`), the same page
 * cost the database more CPU than it saved this process (docs/benchmarks.md), and the database is the
 * part that does not scale out.
 */
const AS_TEXT = { getTypeParser: () => (text: string) => text } as unknown as pg.CustomTypesConfig
const READ_PLANTS = {
  name: 'plantstore-read-plants',
  text: 'SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_FIRST = {
  name: 'plantstore-list-first',
  text: 'SELECT id, name, tag FROM plants ORDER BY id LIMIT $1',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_AFTER = {
  name: 'plantstore-list-after',
  text: 'SELECT id, name, tag FROM plants WHERE id > $1 ORDER BY id LIMIT $2',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_TAG_FIRST = {
  name: 'plantstore-list-tag-first',
  text: 'SELECT id, name, tag FROM plants WHERE tag = $1 ORDER BY id LIMIT $2',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_TAG_AFTER = {
  name: 'plantstore-list-tag-after',
  text: 'SELECT id, name, tag FROM plants WHERE tag = $1 AND id > $2 ORDER BY id LIMIT $3',
  rowMode: 'array',
  types: AS_TEXT
} as const
type PlantText = [id: string, name: string, tag: string | null]

/**
 * PostgreSQL through a node-postgres pool. Writes are group-committed: the creates and deletes that
 * arrive while a batch commits go together in the next transaction, and every caller is answered only
 * after COMMIT returned (with the server's default synchronous_commit, the WAL is flushed).
 * BIGINT columns are parsed to `bigint`, never through a double.
 *
 * The store opens even while the database is down: the schema is brought up to date by the first
 * operation that reaches the database, and every operation until then is a StoreUnavailableError.
 */
export async function openPostgresStore (connectionString: string, options: PostgresOptions): Promise<PlantStore> {
  const pool = new pg.Pool({
    connectionString,
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: options.statementTimeoutMs,
    query_timeout: options.statementTimeoutMs + 1000,
    application_name: 'plantstore',
    keepAlive: true,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID && format !== 'binary'
          ? (text: string) => BigInt(text)
          : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser
    }
  })
  // An idle connection that the server drops emits here; the pool replaces it, and the next query
  // that cannot get a connection reports the outage to its own request.
  pool.on('error', () => {})

  let schemaReady: Promise<void> | undefined
  const ensureSchema = (): Promise<void> => {
    schemaReady ??= migrate(pool).catch((error: unknown) => {
      const failure = asStoreError(error)
      if (failure instanceof StoreUnavailableError) schemaReady = undefined
      throw failure
    })
    return schemaReady
  }

  async function query<Row extends pg.QueryResultRow> (config: pg.QueryConfig): Promise<pg.QueryResult<Row>> {
    await ensureSchema()
    try {
      return await pool.query<Row>(config)
    } catch (error) {
      throw asStoreError(error)
    }
  }

  /**
   * A token transaction. READ COMMITTED whatever the server's default: its statements after the advisory
   * lock must see what the transaction that held the lock committed.
   */
  async function tokenTransaction<T> (work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    await ensureSchema()
    try {
      return await inTransaction(pool, work, 'BEGIN ISOLATION LEVEL READ COMMITTED')
    } catch (error) {
      throw asStoreError(error)
    }
  }

  const commitBatch: CommitBatch = async (operations) => {
    await ensureSchema()
    for (let attempt = 1; ; attempt++) {
      try {
        return await inTransaction(pool, (client) => writeBatch(client, operations))
      } catch (error) {
        const code = (error as { code?: unknown }).code
        if (attempt === BATCH_ATTEMPTS || typeof code !== 'string' || !RETRYABLE_SQLSTATE.test(code)) {
          // Nothing of the batch committed, so each of its requests may be retried as it is: a 503.
          const failure = asStoreError(error)
          throw failure instanceof StoreUnavailableError
            ? failure
            : new StoreUnavailableError(`the write batch did not commit (${(error as Error).message})`, { cause: error })
        }
      }
    }
  }
  const writes = new GroupCommit(commitBatch, {
    backend: 'postgres',
    maxBatchSize: MAX_BATCH_SIZE,
    onBatchCommitted: options.onBatchCommitted
  })

  // GETs of one plant that arrive while others are being read share the next query.
  const reads = new ReadBatch<bigint, PlantJson>(async (ids) => {
    const { rows } = await query<PlantText>({ ...READ_PLANTS, values: [ids.map(String)] })
    return new Map(rows.map(([id, name, tag]) => [BigInt(id), plantJson(id, name, tag)]))
  }, MAX_READ_BATCH_SIZE, options.onReadBatch)

  const tokenChanges = new TokenChangeListener(connectionString, options.connectTimeoutMs)

  try {
    await ensureSchema()
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) {
      await pool.end()
      throw error
    }
  }

  return {
    backend: 'postgres',
    ...groupCommittedWrites(writes),
    get (id) {
      return reads.read(id)
    },
    async list ({ after, limit, tag }) {
      const { rows } = await query<PlantText>(tag === undefined
        ? (after === undefined ? { ...LIST_FIRST, values: [limit + 1] } : { ...LIST_AFTER, values: [after.toString(), limit + 1] })
        : (after === undefined ? { ...LIST_TAG_FIRST, values: [tag, limit + 1] } : { ...LIST_TAG_AFTER, values: [tag, after.toString(), limit + 1] }))
      return pageOf(rows.map(([id, name, tag]) => plantJson(id, name, tag)), limit, (index) => BigInt(rows[index]?.[0] ?? ''))
    },
    tokens: postgresTokenStore(query, tokenTransaction, tokenChanges),
    webhooks: postgresWebhookStore(query, async (work) => {
      await ensureSchema()
      try {
        return await inTransaction(pool, work)
      } catch (error) {
        throw asStoreError(error)
      }
    }),
    observe (observer) {
      writes.observer = observer
    },
    poolUsage: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: options.poolSize }),
    async ping () {
      try {
        await query({ text: 'SELECT 1' })
      } catch (error) {
        throw error instanceof StoreUnavailableError
          ? error
          : new StoreUnavailableError(`PostgreSQL cannot be queried (${(error as Error).message})`, { cause: error })
      }
    },
    async close () {
      await writes.whenIdle()
      await tokenChanges.close()
      await pool.end()
    }
  }
}

/** The channel on which every token change is announced, in the transaction that makes it. */
const TOKEN_CHANNEL = 'plantstore_access_tokens'
/** Serializes token creates, so the check that a name is free and the insert cannot interleave. */
const TOKEN_LOCK_KEY = '7243190561180520498'
const TOKEN_COLUMNS = 'id, name, scopes, created_at, expires_at, revoked_at'

interface TokenRow {
  readonly id: string
  readonly name: string
  readonly scopes: string
  readonly created_at: Date
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
}

type Query = <Row extends pg.QueryResultRow>(config: pg.QueryConfig) => Promise<pg.QueryResult<Row>>
type Transaction = <T>(work: (client: pg.PoolClient) => Promise<T>) => Promise<T>

function postgresTokenStore (query: Query, transaction: Transaction, changes: TokenChangeListener): AccessTokenStore {
  const insert = async (client: pg.PoolClient, token: VerifiableAccessToken) => {
    await client.query(
      'INSERT INTO access_tokens (id, name, scopes, sha256, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [token.id, token.name, scopesText(token.scopes), token.digest, token.createdAt, token.expiresAt ?? null])
    await announceChange(client)
  }
  return {
    async list () {
      const { rows } = await query<TokenRow>({ text: `SELECT ${TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at DESC, id DESC` })
      return rows.map(tokenOfRow)
    },
    async listVerifiable () {
      const { rows } = await query<TokenRow & { sha256: Buffer }>({
        text: `SELECT ${TOKEN_COLUMNS}, sha256 FROM access_tokens WHERE revoked_at IS NULL`
      })
      return rows.map((row) => ({ ...tokenOfRow(row), digest: row.sha256 }))
    },
    async revision () {
      const { rows } = await query<{ revision: bigint }>({ text: 'SELECT revision FROM access_token_revision WHERE singleton = 1' })
      return String(rows[0]?.revision)
    },
    create (token) {
      return transaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [TOKEN_LOCK_KEY])
        const { rowCount } = await client.query(
          'SELECT 1 FROM access_tokens WHERE name = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)',
          [token.name, token.createdAt])
        if (rowCount !== 0) return 'name-taken'
        await insert(client, token)
        return 'created'
      })
    },
    revoke (id, at) {
      return transaction(async (client) => {
        const { rowCount } = await client.query('UPDATE access_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [at, id])
        if (rowCount === 1) await announceChange(client)
        const { rows } = await client.query<TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE id = $1`, [id])
        return rows[0] === undefined ? undefined : tokenOfRow(rows[0])
      })
    },
    createInitialAdmin (token) {
      return transaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [TOKEN_LOCK_KEY])
        const { rowCount } = await client.query('SELECT 1 FROM access_tokens LIMIT 1')
        if (rowCount !== 0) return false
        await insert(client, token)
        return true
      })
    },
    watch (listener) {
      return changes.add(listener)
    }
  }
}

const CLAIM_OUTBOX = {
  name: 'plantstore-claim-outbox',
  text: `WITH due AS (
           SELECT o.id FROM webhook_outbox o
           WHERE o.failed_at IS NULL AND o.next_attempt_at <= $1 AND o.lease_until <= $1
             AND EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = o.subscription_id AND s.disabled_at IS NULL)
             AND NOT EXISTS (SELECT 1 FROM webhook_outbox e WHERE e.subscription_id = o.subscription_id AND e.plant_id = o.plant_id
                             AND e.id < o.id AND e.failed_at IS NULL)
           ORDER BY o.next_attempt_at, o.id LIMIT $2
           FOR UPDATE OF o SKIP LOCKED)
         UPDATE webhook_outbox o SET lease_until = $3, lease_owner = $4
         FROM due, webhook_subscriptions s
         WHERE o.id = due.id AND s.id = o.subscription_id
         RETURNING ${OUTBOX_COLUMNS.split(', ').map((column) => `o.${column}`).join(', ')}, s.url, s.secret`
}
const RECORD_ATTEMPTS = {
  name: 'plantstore-record-attempts',
  text: `INSERT INTO webhook_attempts (subscription_id, event_id, event_type, attempt, status_code, error, at)
         SELECT a.* FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::bigint[])
           AS a (subscription_id, event_id, event_type, attempt, status_code, error, at)
         WHERE EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = a.subscription_id)`
}
const SETTLE_DELIVERED = {
  name: 'plantstore-settle-delivered',
  text: `WITH done AS (DELETE FROM webhook_outbox WHERE id = ANY($1::bigint[]) AND lease_owner = $2 RETURNING subscription_id)
         UPDATE webhook_subscriptions s SET delivered = s.delivered + counted.n
         FROM (SELECT subscription_id, count(*) AS n FROM done GROUP BY subscription_id) counted
         WHERE s.id = counted.subscription_id`
}

type Transact = <T>(work: (client: pg.PoolClient) => Promise<T>) => Promise<T>

/** Webhook subscriptions and their outbox. Several instances share the outbox: see `claim`. */
function postgresWebhookStore (query: Query, transaction: Transact): WebhookStore {
  return {
    async createSubscription (subscription) {
      await query({
        text: 'INSERT INTO webhook_subscriptions (id, url, events, secret, created_at) VALUES ($1, $2, $3, $4, $5)',
        values: [subscription.id, subscription.url, subscription.events.join(' '), subscription.storedSecret, subscription.createdAt]
      })
    },
    async listSubscriptions () {
      const { rows } = await query<SubscriptionRow>({ text: `SELECT ${SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY created_at DESC, id DESC` })
      return rows.map(subscriptionOfRow)
    },
    async getSubscription (id) {
      const { rows } = await query<SubscriptionStatusRow & { pending: bigint }>({
        text: `SELECT ${SUBSCRIPTION_STATUS_COLUMNS},
                 (SELECT count(*) FROM webhook_outbox o WHERE o.subscription_id = s.id AND o.failed_at IS NULL) AS pending
               FROM webhook_subscriptions s WHERE id = $1`,
        values: [id]
      })
      const row = rows[0]
      return row === undefined ? undefined : subscriptionStatusOfRow(row, row.pending)
    },
    deleteSubscription (id) {
      return transaction(async (client) => {
        await client.query('DELETE FROM webhook_outbox WHERE subscription_id = $1', [id])
        await client.query('DELETE FROM webhook_attempts WHERE subscription_id = $1', [id])
        const { rowCount } = await client.query('DELETE FROM webhook_subscriptions WHERE id = $1', [id])
        return rowCount === 1
      })
    },
    async listAttempts (subscriptionId, { after, limit }) {
      const { rows } = await query<AttemptRow>(after === undefined
        ? { text: `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = $1 ORDER BY id DESC LIMIT $2`, values: [subscriptionId, limit + 1] }
        : { text: `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, values: [subscriptionId, after.toString(), limit + 1] })
      return attemptPageOf(rows, limit)
    },
    async claim ({ owner, now, leaseMs, limit }) {
      const { rows } = await query<OutboxRow & { url: string, secret: string }>({ ...CLAIM_OUTBOX, values: [now, limit, now + leaseMs, owner] })
      return claimedDeliveries(rows, new Map(rows.map((row) => [row.subscription_id, row])))
    },
    async settle (owner, attempts) {
      if (attempts.length === 0) return
      await transaction(async (client) => {
        await client.query({
          ...RECORD_ATTEMPTS,
          values: [
            attempts.map((attempt) => attempt.delivery.subscriptionId),
            attempts.map((attempt) => attempt.delivery.eventId),
            attempts.map((attempt) => attempt.delivery.type),
            attempts.map((attempt) => attempt.delivery.attempts + 1),
            attempts.map((attempt) => attempt.statusCode ?? null),
            attempts.map((attempt) => attempt.error ?? null),
            attempts.map((attempt) => attempt.at)
          ]
        })
        const delivered = attempts.filter((attempt) => attempt.result === 'delivered').map((attempt) => attempt.delivery.id.toString())
        if (delivered.length > 0) await client.query({ ...SETTLE_DELIVERED, values: [delivered, owner] })
        for (const attempt of attempts) if (attempt.result !== 'delivered') await settleUndelivered(client, owner, attempt)
      })
    },
    async pruneAttempts (before) {
      const { rowCount } = await query({ text: 'DELETE FROM webhook_attempts WHERE at < $1', values: [before] })
      return rowCount ?? 0
    },
    async backlog () {
      const { rows } = await query<{ pending: bigint, oldest: bigint | null }>({
        text: 'SELECT count(*) AS pending, min(created_at) AS oldest FROM webhook_outbox WHERE failed_at IS NULL'
      })
      const { pending = 0n, oldest = null } = rows[0] ?? {}
      return oldest === null ? { pending: Number(pending) } : { pending: Number(pending), oldestRecordedAt: Number(oldest) }
    },
    async storedSecrets () {
      const { rows } = await query<{ id: string, secret: string }>({ text: 'SELECT id, secret FROM webhook_subscriptions' })
      return rows.map((row) => ({ id: row.id, storedSecret: row.secret }))
    }
  }
}

/** A retry, a failure or a 410 of one outbox row, unless its lease went to another instance meanwhile. */
async function settleUndelivered (client: pg.PoolClient, owner: string, attempt: SettledAttempt): Promise<void> {
  const { delivery, at } = attempt
  const message = attempt.error ?? `HTTP ${attempt.statusCode}`
  if (attempt.result === 'retry') {
    const { rowCount } = await client.query(
      'UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = $1, lease_until = 0, lease_owner = NULL WHERE id = $2 AND lease_owner = $3',
      [attempt.nextAttemptAt, delivery.id.toString(), owner])
    if (rowCount === 1) await client.query('UPDATE webhook_subscriptions SET last_error = $1, last_error_at = $2 WHERE id = $3', [message, at, delivery.subscriptionId])
    return
  }
  const { rowCount } = await client.query(
    'UPDATE webhook_outbox SET attempts = attempts + 1, failed_at = $1, lease_until = 0, lease_owner = NULL WHERE id = $2 AND lease_owner = $3',
    [at, delivery.id.toString(), owner])
  if (rowCount !== 1) return
  let failures = 1
  if (attempt.result === 'gone') {
    const disabled = await client.query(
      'UPDATE webhook_subscriptions SET disabled_at = $1, disabled_reason = $2 WHERE id = $3 AND disabled_at IS NULL',
      [at, 'the receiver answered 410 Gone', delivery.subscriptionId])
    if (disabled.rowCount === 1) {
      const dropped = await client.query('UPDATE webhook_outbox SET failed_at = $1 WHERE subscription_id = $2 AND failed_at IS NULL', [at, delivery.subscriptionId])
      failures += dropped.rowCount ?? 0
    }
  }
  await client.query('UPDATE webhook_subscriptions SET last_error = $1, last_error_at = $2, failed = failed + $3 WHERE id = $4',
    [message, at, failures, delivery.subscriptionId])
}

/** Advances the revision and notifies listening instances; both take effect when the transaction commits. */
async function announceChange (client: pg.PoolClient): Promise<void> {
  await client.query('UPDATE access_token_revision SET revision = revision + 1 WHERE singleton = 1')
  await client.query('SELECT pg_notify($1, \'\')', [TOKEN_CHANNEL])
}

function tokenOfRow (row: TokenRow): AccessTokenRecord {
  return {
    id: row.id,
    name: row.name,
    scopes: scopesOfText(row.scopes),
    createdAt: row.created_at,
    ...(row.expires_at === null ? {} : { expiresAt: row.expires_at }),
    ...(row.revoked_at === null ? {} : { revokedAt: row.revoked_at })
  }
}

const LISTEN_RETRY_MS = 1000

/**
 * One connection of its own (a pooled one cannot stay in `LISTEN`) that receives the token-change
 * notifications and calls the listeners. It connects on the first listener and reconnects a second
 * after it is lost; notifications sent while it is down are missed, which the revision poll covers.
 */
class TokenChangeListener {
  private readonly listeners = new Set<() => void>()
  private client: pg.Client | undefined
  private retry: NodeJS.Timeout | undefined
  private closed = false

  constructor (private readonly connectionString: string, private readonly connectTimeoutMs: number) {}

  add (listener: () => void): () => void {
    this.listeners.add(listener)
    if (this.client === undefined && this.retry === undefined) this.connect()
    return () => { this.listeners.delete(listener) }
  }

  async close (): Promise<void> {
    this.closed = true
    clearTimeout(this.retry)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => {})
  }

  private connect (): void {
    if (this.closed || this.listeners.size === 0) return
    const client = new pg.Client({
      connectionString: this.connectionString,
      connectionTimeoutMillis: this.connectTimeoutMs,
      application_name: 'plantstore-token-listener',
      keepAlive: true
    })
    this.client = client
    let lost = false
    const reconnect = () => {
      if (lost) return
      lost = true
      client.end().catch(() => {})
      if (this.client === client) this.client = undefined
      if (!this.closed) this.retry = setTimeout(() => { this.retry = undefined; this.connect() }, LISTEN_RETRY_MS).unref()
    }
    client.on('error', reconnect)
    client.on('end', reconnect)
    client.on('notification', () => {
      for (const listener of this.listeners) listener()
    })
    client.connect()
      .then(() => client.query(`LISTEN ${TOKEN_CHANNEL}`))
      // Changes made while this was not listening are picked up now rather than at the next poll.
      .then(() => { for (const listener of this.listeners) listener() })
      .catch(reconnect)
  }
}

/** The connection dropping under a checked-out client is reported by its pending query; without a listener it would crash the process. */
const ignoreClientError = () => {}

async function inTransaction<T> (pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect()
  client.on('error', ignoreClientError)
  let failure: unknown
  try {
    await client.query(begin)
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (error) {
    failure = error
    await client.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    client.off('error', ignoreClientError)
    // A client whose transaction failed may hold a broken connection: destroy it rather than reuse it.
    client.release(failure !== undefined)
  }
}

/**
 * Runs one batch (its ids repeat only among creates; see GroupCommit) and works out each operation's
 * result. It first locks the rows its changes name (in id order) and decides them (decideChange), then
 * writes every new row, its creates' and its changes', in one id-ordered INSERT, then updates and
 * deletes rows it holds locked. After the first statement a batch waits only for other transactions'
 * uncommitted inserts, met in id order, so the batches of several instances cannot deadlock.
 */
async function writeBatch (client: pg.PoolClient, operations: readonly WriteOperation[]): Promise<Array<WriteOutcome | typeof RUN_AGAIN>> {
  const creates: CreateOperation[] = []
  const changes: ChangeOperation[] = []
  for (const operation of operations) {
    if (operation.kind === 'create') creates.push(operation)
    else changes.push(operation)
  }
  const results = new Map<WriteOperation, WriteOutcome | typeof RUN_AGAIN>()
  const decided = await lockAndDecide(client, changes, results)
  const firstCreateById = new Map<bigint, PlantRecord>()
  for (const { plant } of creates) if (!firstCreateById.has(plant.id)) firstCreateById.set(plant.id, plant)
  const newRows = [...firstCreateById.values(), ...decided.toInsert]
  const { inserted, subscribed } = newRows.length === 0 ? { inserted: new Set<bigint>(), subscribed: false } : await insertPlants(client, newRows)
  // A change that meant to create a row a concurrent transaction inserted first settles in a later batch.
  for (const [id, change] of decided.inserting) if (!inserted.has(id)) results.set(change, RUN_AGAIN)
  await settleCreates(client, creates, firstCreateById, inserted, results)
  if (decided.toUpdate.length > 0) await client.query({ ...UPDATE_PLANTS, values: columnsOf(decided.toUpdate) })
  if (decided.toDelete.length > 0) await client.query({ ...DELETE_PLANTS, values: [decided.toDelete.map(String)] })
  // Every event's row came back from one of the two statements, so their flags cover all of them.
  if (decided.subscribed || subscribed) {
    await recordEvents(client, [
      ...[...firstCreateById.values()].filter((plant) => inserted.has(plant.id)).map((plant) => plantEvent('plant.created', plant)),
      ...decided.toInsert.filter((plant) => inserted.has(plant.id)).map((plant) => plantEvent('plant.created', plant)),
      ...decided.toUpdate.map((plant) => plantEvent('plant.updated', plant)),
      ...decided.toDelete.map((id): PlantEvent => ({ type: 'plant.deleted', plantId: id, body: deletedPlantBody(id) }))
    ])
  }
  return operations.map((operation) => {
    const result = results.get(operation)
    if (result === undefined) throw new Error('a write batch left an operation without a result')
    return result
  })
}

interface PlantEvent { readonly type: WebhookEventType, readonly plantId: bigint, readonly body: string }

function plantEvent (type: WebhookEventType, plant: PlantRecord): PlantEvent {
  return { type, plantId: plant.id, body: plantJson(plant.id, plant.name, plant.tag) }
}

/**
 * The outbox half of the transactional outbox: one row per event and enabled subscription that wants
 * it, in the batch's transaction, so the events commit exactly when their writes do. One statement.
 */
async function recordEvents (client: pg.PoolClient, events: readonly PlantEvent[]): Promise<void> {
  if (events.length === 0) return
  const now = Date.now()
  await client.query({
    ...INSERT_OUTBOX,
    values: [events.map(newEventId), events.map((event) => event.type), events.map((event) => event.plantId.toString()), events.map((event) => event.body), now]
  })
}

interface DecidedChanges {
  /** Whether a subscription was enabled when the rows were locked (false when no row was). */
  readonly subscribed: boolean
  readonly toInsert: PlantRecord[]
  readonly toUpdate: PlantRecord[]
  readonly toDelete: bigint[]
  /** The change behind each row of `toInsert`, by id. */
  readonly inserting: Map<bigint, ChangeOperation>
}

/** Locks the rows of the changes' ids and decides each change on its row; writes nothing yet. */
async function lockAndDecide (client: pg.PoolClient, changes: readonly ChangeOperation[], results: Map<WriteOperation, WriteOutcome | typeof RUN_AGAIN>): Promise<DecidedChanges> {
  if (changes.length === 0) return { subscribed: false, toInsert: [], toUpdate: [], toDelete: [], inserting: new Map() }
  const ids = changes.map(idOf)
  const locked = await client.query<PlantRow & { subscribed: boolean }>({ ...LOCK_PLANTS, values: [ids.map(String)] })
  const decided: DecidedChanges = { subscribed: locked.rows[0]?.subscribed === true, toInsert: [], toUpdate: [], toDelete: [], inserting: new Map() }
  const current = new Map(locked.rows.map((row) => [row.id, recordOfRow(row)]))
  changes.forEach((change, index) => {
    const id = ids[index] as bigint
    const before = current.get(id)
    const { outcome, after } = decideChange(change, before)
    results.set(change, outcome)
    if (before === undefined && after !== undefined) {
      decided.toInsert.push(after)
      decided.inserting.set(id, change)
    } else if (before !== undefined && after === undefined) {
      decided.toDelete.push(id)
    } else if (before !== undefined && after !== undefined && !samePlant(before, after)) {
      decided.toUpdate.push(after)
    }
  })
  return decided
}

/** Each create's result: created, or a replay of or a conflict with the row it met. */
async function settleCreates (
  client: pg.PoolClient,
  creates: readonly CreateOperation[],
  firstCreateById: ReadonlyMap<bigint, PlantRecord>,
  inserted: ReadonlySet<bigint>,
  results: Map<WriteOperation, WriteOutcome | typeof RUN_AGAIN>
): Promise<void> {
  const stored = new Map<bigint, PlantRecord>()
  const met = [...firstCreateById.keys()].filter((id) => !inserted.has(id)).map(String)
  if (met.length > 0) {
    const found = await client.query<PlantRow>({ ...SELECT_PLANTS, values: [met] })
    for (const row of found.rows) stored.set(row.id, recordOfRow(row))
  }
  for (const operation of creates) {
    const { plant } = operation
    const existing = inserted.has(plant.id) ? firstCreateById.get(plant.id) : stored.get(plant.id)
    // Met a row that a concurrent delete removed before it could be read: settle it in a later batch.
    if (existing === undefined) results.set(operation, RUN_AGAIN)
    else results.set(operation, existing === plant ? { status: 'created', plant } : outcomeOfMeeting(existing, plant))
  }
}

/** Inserts the rows whose ids are free: which ids were, and whether a subscription was enabled (false when none was inserted). */
async function insertPlants (client: pg.PoolClient, plants: readonly PlantRecord[]): Promise<{ inserted: Set<bigint>, subscribed: boolean }> {
  const result = await client.query<{ id: bigint, subscribed: boolean }>({ ...INSERT_PLANTS, values: columnsOf(plants) })
  return { inserted: new Set(result.rows.map((row) => row.id)), subscribed: result.rows[0]?.subscribed === true }
}

function columnsOf (plants: readonly PlantRecord[]): [string[], string[], Array<string | null>] {
  return [plants.map((plant) => plant.id.toString()), plants.map((plant) => plant.name), plants.map((plant) => plant.tag ?? null)]
}

/** SQLSTATE classes that mean "not now": connection exceptions, insufficient resources, operator intervention. */
const TRANSIENT_SQLSTATE = /^(08|53|57)/

function asStoreError (error: unknown): unknown {
  if (error instanceof SchemaTooNewError || error instanceof StoreUnavailableError) return error
  if (error instanceof TypeError || error instanceof RangeError) return error
  const code = (error as { code?: unknown }).code
  const isSqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)
  // Without a SQLSTATE the error is the connection's own: refused, reset, timed out, terminated.
  if (!isSqlState || TRANSIENT_SQLSTATE.test(code)) {
    return new StoreUnavailableError(`PostgreSQL is unavailable (${isSqlState ? code : (error as Error).message})`, { cause: error })
  }
  return error
}

async function migrate (pool: pg.Pool): Promise<void> {
  const known = latestVersion(postgresMigrations)
  await inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY])
    await client.query(MIGRATIONS_TABLE)
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM plantstore_migrations')
    const current = rows[0]?.version ?? 0
    if (current > known) throw new SchemaTooNewError(current, known)
    for (const migration of postgresMigrations) {
      if (migration.version <= current) continue
      await client.query(migration.sql)
      await client.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
    }
  })
}
