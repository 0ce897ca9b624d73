import { SqliteError, type SqliteDatabase, type Statement } from './driver.js'
import { DEFAULT_BUSY_TIMEOUT_MS, openSqliteDatabase, type SqliteConnectionOptions } from './connection.js'
import { GroupCommit, groupCommittedWrites } from '../group-commit.js'
import { decideChange, type WriteOperation, type WriteOutcome } from '../write-operations.js'
import { SqliteWriteError, SqliteWriter, type WebhookCommand, type WriteEffect } from './writer.js'
import { ReadBatch } from '../read-batch.js'
import { scopesOfText, scopesText } from '../stored-scopes.js'
import type { AccessTokenRecord, AccessTokenStore, VerifiableAccessToken } from '../access-token-store.js'
import {
  ATTEMPT_COLUMNS, attemptPageOf, claimedDeliveries, SUBSCRIPTION_COLUMNS, SUBSCRIPTION_STATUS_COLUMNS, subscriptionOfRow,
  subscriptionStatusOfRow, type AttemptRow, type ClaimedDelivery, type OutboxRow, type SubscriptionRow, type SubscriptionStatusRow,
  type WebhookStore
} from '../webhook-store.js'
import {
  outcomeOfMeeting, pageOf, plantJson, plantJsonOfTag, recordOfRow, StoreUnavailableError, type PlantJson, type PlantStore
} from '../plant-store.js'

export interface SqliteOptions extends SqliteConnectionOptions {
  /** Called after each committed write batch with its size: for tests and metrics. */
  readonly onBatchCommitted?: (size: number) => void
  /** Called after each batch of single-plant reads with its size: for tests and metrics. */
  readonly onReadBatch?: (size: number) => void
}
const MAX_BATCH_SIZE = 256
const MAX_READ_BATCH_SIZE = 500

/** Error codes that mean "not now" rather than "never": the request may succeed when retried. */
const TRANSIENT_CODES = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|PROTOCOL)/

/**
 * The embedded default store: one SQLite file in WAL mode with synchronous=FULL, so a commit has
 * reached the disk (fsync of the WAL) before `create` or `delete` resolves. Writes are group-committed
 * by a writer thread: the writes that arrive while one batch commits share the next transaction and
 * fsync. Reads use this thread's own connection. Integers are read as `bigint`.
 */
export function openSqliteStore (file: string, options: SqliteOptions = {}): PlantStore {
  const db = openSqliteDatabase(file, options)

  const selectPlants = packedRows(db.prepare<[string]>(
    `SELECT ${PACKED_PLANT} FROM plants WHERE id IN (SELECT value FROM json_each(?))`))
  const listFirst = packedRows(db.prepare<[number]>(`SELECT ${PACKED_PLANT} FROM plants ORDER BY id LIMIT ?`))
  const listAfter = packedRows(db.prepare<[bigint, number]>(`SELECT ${PACKED_PLANT} FROM plants WHERE id > ? ORDER BY id LIMIT ?`))
  // A tag's page leaves the tag out of its rows: it is the one asked for.
  const listTagFirst = packedRows(db.prepare<[string, number]>(`SELECT ${PACKED_ID_AND_NAME} FROM plants WHERE tag = ? ORDER BY id LIMIT ?`))
  const listTagAfter = packedRows(db.prepare<[string, bigint, number]>(
    `SELECT ${PACKED_ID_AND_NAME} FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?`))
  // Reads a page of the plants table, so a missing or unreadable file fails readiness.
  const probe = db.prepare('SELECT count(*) FROM (SELECT 1 FROM plants LIMIT 1)')

  const writer = new SqliteWriter({ file, busyTimeoutMs: options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS })
  const commitBatch = async (operations: readonly WriteOperation[]) => {
    let effects
    try {
      effects = await writer.write(operations)
    } catch (error) {
      throw asUnavailable(error)
    }
    return operations.map((operation, index) => outcomeOf(operation, effects[index]))
  }
  const writes = new GroupCommit(commitBatch,
    { backend: 'sqlite', maxBatchSize: MAX_BATCH_SIZE, onBatchCommitted: options.onBatchCommitted })

  // The GETs of one event-loop turn share one statement: one read transaction and one pass through the
  // driver for all of them costs about a third of a statement each (docs/benchmarks.md).
  const reads = new ReadBatch<bigint, PlantJson>(async (ids) => {
    const packed = unlessTransient(() => selectPlants.all(`[${ids.join(',')}]`))
    return new Map(packed.map((row) => {
      const plant = unpack(row)
      return [BigInt(plant.id), plant.json]
    }))
  }, MAX_READ_BATCH_SIZE, options.onReadBatch)

  return {
    backend: 'sqlite',
    ...groupCommittedWrites(writes),
    get (id) {
      return reads.read(id)
    },
    async list ({ after, limit, tag }) {
      if (tag !== undefined) {
        const packed = unlessTransient(() => after === undefined ? listTagFirst.all(tag, limit + 1) : listTagAfter.all(tag, after, limit + 1))
        const plantOfTag = plantJsonOfTag(tag)
        const plants = packed.map((row) => {
          const idEnd = row.indexOf('\0')
          const id = row.slice(0, idEnd)
          return { id, json: plantOfTag(id, row.slice(idEnd + 1)) }
        })
        return pageOf(plants.map((plant) => plant.json), limit, (index) => BigInt(plants[index]?.id ?? ''))
      }
      const packed = unlessTransient(() => after === undefined ? listFirst.all(limit + 1) : listAfter.all(after, limit + 1))
      const plants = packed.map(unpack)
      return pageOf(plants.map((plant) => plant.json), limit, (index) => BigInt(plants[index]?.id ?? ''))
    },
    tokens: sqliteTokenStore(db),
    webhooks: sqliteWebhookStore(db, writer),
    observe (observer) {
      writes.observer = observer
    },
    async ping () {
      try {
        probe.get()
      } catch (error) {
        throw new StoreUnavailableError(`SQLite cannot be read (${(error as Error).message})`, { cause: error })
      }
    },
    async close () {
      await reads.whenIdle()
      await writes.whenIdle()
      await writer.close()
      if (db.open) db.close()
    }
  }
}

interface TokenRow {
  readonly id: string
  readonly name: string
  readonly scopes: string
  readonly created_at: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
}

const TOKEN_COLUMNS = 'id, name, scopes, created_at, expires_at, revoked_at'

/**
 * Tokens live in the same file, written on this thread's connection (synchronous=FULL, so a create or a
 * revoke is on disk when it resolves); they are rare enough not to need the writer thread. Times are
 * stored as `toISOString()` text, which sorts in time order.
 */
function sqliteTokenStore (db: SqliteDatabase): AccessTokenStore {
  const selectAll = db.prepare<[], TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at DESC, id DESC`)
  const selectVerifiable = db.prepare<[], TokenRow & { sha256: Buffer }>(
    `SELECT ${TOKEN_COLUMNS}, sha256 FROM access_tokens WHERE revoked_at IS NULL`)
  const selectOne = db.prepare<[string], TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE id = ?`)
  const selectRevision = db.prepare<[], bigint>('SELECT revision FROM access_token_revision WHERE singleton = 1').pluck(true)
  const selectLiveName = db.prepare<[string, string], number>(
    'SELECT 1 FROM access_tokens WHERE name = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)').pluck(true)
  const selectAny = db.prepare<[], number>('SELECT 1 FROM access_tokens LIMIT 1').pluck(true)
  const insert = db.prepare<[string, string, string, Buffer, string, string | null]>(
    'INSERT INTO access_tokens (id, name, scopes, sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
  const revoke = db.prepare<[string, string]>('UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL')
  const advanceRevision = db.prepare('UPDATE access_token_revision SET revision = revision + 1 WHERE singleton = 1')

  const store = (token: VerifiableAccessToken) => {
    insert.run(token.id, token.name, scopesText(token.scopes), token.digest, token.createdAt.toISOString(), token.expiresAt?.toISOString() ?? null)
    advanceRevision.run()
  }
  const create = db.transaction((token: VerifiableAccessToken) => {
    if (selectLiveName.get(token.name, token.createdAt.toISOString()) !== undefined) return 'name-taken' as const
    store(token)
    return 'created' as const
  })
  const createInitialAdmin = db.transaction((token: VerifiableAccessToken) => {
    if (selectAny.get() !== undefined) return false
    store(token)
    return true
  })
  const revokeToken = db.transaction((id: string, at: Date) => {
    if (revoke.run(at.toISOString(), id).changes === 1) advanceRevision.run()
    const row = selectOne.get(id)
    return row === undefined ? undefined : tokenOfRow(row)
  })

  return {
    async list () {
      return unlessTransient(() => selectAll.all()).map(tokenOfRow)
    },
    async listVerifiable () {
      return unlessTransient(() => selectVerifiable.all()).map((row) => ({ ...tokenOfRow(row), digest: row.sha256 }))
    },
    async revision () {
      return String(unlessTransient(() => selectRevision.get()))
    },
    async create (token) {
      return unlessTransient(() => create.immediate(token))
    },
    async revoke (id, at) {
      return unlessTransient(() => revokeToken.immediate(id, at))
    },
    async createInitialAdmin (token) {
      return unlessTransient(() => createInitialAdmin.immediate(token))
    }
  }
}

/**
 * Webhook subscriptions and their outbox: read on this thread's connection, written by the writer
 * thread (its webhook commands), so that neither the dispatcher nor an admin request holds the event
 * loop while another connection has the database locked.
 */
function sqliteWebhookStore (db: SqliteDatabase, writer: SqliteWriter): WebhookStore {
  const selectAll = db.prepare<[], SubscriptionRow>(`SELECT ${SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY created_at DESC, id DESC`)
  const selectOne = db.prepare<[string], SubscriptionStatusRow>(`SELECT ${SUBSCRIPTION_STATUS_COLUMNS} FROM webhook_subscriptions WHERE id = ?`)
  const countPending = db.prepare<[string], bigint>(
    'SELECT count(*) FROM webhook_outbox WHERE subscription_id = ? AND failed_at IS NULL').pluck(true)
  const attemptsFirst = db.prepare<[string, number], AttemptRow>(
    `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = ? ORDER BY id DESC LIMIT ?`)
  const attemptsAfter = db.prepare<[string, bigint, number], AttemptRow>(
    `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = ? AND id < ? ORDER BY id DESC LIMIT ?`)
  const secrets = db.prepare<[], { id: string, url: string, secret: string }>('SELECT id, url, secret FROM webhook_subscriptions')
  const backlog = db.prepare<[], { pending: number, oldest: number | bigint | null }>(
    'SELECT count(*) AS pending, min(created_at) AS oldest FROM webhook_outbox WHERE failed_at IS NULL')
  // Spares the writer thread a transaction when nothing is due, which is most of the dispatcher's polls.
  const anyDue = db.prepare<[bigint, bigint], number>(
    'SELECT 1 FROM webhook_outbox WHERE failed_at IS NULL AND next_attempt_at <= ? AND lease_until <= ? LIMIT 1').pluck(true)
  const command = async (name: WebhookCommand, argument: unknown): Promise<unknown> => {
    try {
      return await writer.webhookCommand(name, argument)
    } catch (error) {
      throw asUnavailable(error)
    }
  }

  return {
    async createSubscription (subscription) {
      await command('createSubscription', subscription)
    },
    async listSubscriptions () {
      return unlessTransient(() => selectAll.all()).map(subscriptionOfRow)
    },
    async getSubscription (id) {
      const row = unlessTransient(() => selectOne.get(id))
      return row === undefined ? undefined : subscriptionStatusOfRow(row, unlessTransient(() => countPending.get(id)) ?? 0n)
    },
    async deleteSubscription (id) {
      return await command('deleteSubscription', id) as boolean
    },
    async listAttempts (subscriptionId, { after, limit }) {
      const rows = unlessTransient(() => after === undefined
        ? attemptsFirst.all(subscriptionId, limit + 1)
        : attemptsAfter.all(subscriptionId, after, limit + 1))
      return attemptPageOf(rows, limit)
    },
    async claim (request): Promise<ClaimedDelivery[]> {
      const now = BigInt(request.now)
      if (unlessTransient(() => anyDue.get(now, now)) === undefined) return []
      const rows = await command('claim', request) as OutboxRow[]
      if (rows.length === 0) return []
      return claimedDeliveries(rows, new Map(unlessTransient(() => secrets.all()).map((row) => [row.id, row])))
    },
    async settle (owner, attempts) {
      // Only what the writer records crosses to its thread: copying bodies, URLs and secrets there cost
      // a fifth of the dispatcher's time (docs/benchmarks.md).
      if (attempts.length === 0) return
      await command('settle', {
        owner,
        attempts: attempts.map(({ delivery, ...outcome }) => ({
          ...outcome,
          delivery: { id: delivery.id, subscriptionId: delivery.subscriptionId, eventId: delivery.eventId, type: delivery.type, attempts: delivery.attempts }
        }))
      })
    },
    async pruneAttempts (before) {
      return await command('pruneAttempts', before) as number
    },
    async backlog () {
      const { pending, oldest } = unlessTransient(() => backlog.get()) as { pending: number, oldest: number | bigint | null }
      return oldest === null ? { pending: Number(pending) } : { pending: Number(pending), oldestRecordedAt: Number(oldest) }
    },
    async storedSecrets () {
      return unlessTransient(() => secrets.all()).map((row) => ({ id: row.id, storedSecret: row.secret }))
    }
  }
}

function tokenOfRow (row: TokenRow): AccessTokenRecord {
  return {
    id: row.id,
    name: row.name,
    scopes: scopesOfText(row.scopes),
    createdAt: new Date(row.created_at),
    ...(row.expires_at === null ? {} : { expiresAt: new Date(row.expires_at) }),
    ...(row.revoked_at === null ? {} : { revokedAt: new Date(row.revoked_at) })
  }
}

/**
 * A plant read as one text, `id NUL name [NUL tag]`: the driver turns each value it returns into a
 * JavaScript value at a fixed cost, so one text per row reads a page in about two thirds of the time
 * three values take (docs/benchmarks.md). No name or tag holds U+0000 (the field rules refuse it).
 */
const PACKED_PLANT = "id || char(0) || name || CASE WHEN tag IS NULL THEN '' ELSE char(0) || tag END"
const PACKED_ID_AND_NAME = 'id || char(0) || name'

function packedRows<P extends unknown[]> (statement: Statement<P>): Statement<P, string> {
  return statement.pluck(true) as unknown as Statement<P, string>
}

/** The id (as decimal text) and the JSON document of a packed plant. */
function unpack (packed: string): { readonly id: string, readonly json: PlantJson } {
  const idEnd = packed.indexOf('\0')
  const nameEnd = packed.indexOf('\0', idEnd + 1)
  const id = packed.slice(0, idEnd)
  const json = nameEnd === -1
    ? plantJson(id, packed.slice(idEnd + 1), null)
    : plantJson(id, packed.slice(idEnd + 1, nameEnd), packed.slice(nameEnd + 1))
  return { id, json }
}

/** Operations run in arrival order in the writer's transaction, so repeated ids in a batch just work. */
function outcomeOf (operation: WriteOperation, effect: WriteEffect | undefined): WriteOutcome {
  if (operation.kind !== 'create') {
    if (effect === undefined || !('before' in effect)) throw new Error('the SQLite writer answered out of step')
    return decideChange(operation, effect.before === undefined ? undefined : recordOfRow(effect.before)).outcome
  }
  const { plant } = operation
  if (effect === undefined || !('inserted' in effect)) throw new Error('the SQLite writer answered out of step')
  if (effect.inserted) return { status: 'created', plant }
  if (effect.existing === undefined) throw new Error(`plant ${plant.id} met a row that is not there`)
  return outcomeOfMeeting(recordOfRow(effect.existing), plant)
}

/** A writer error that means "not now" as a StoreUnavailableError; others as they are. */
function asUnavailable (error: unknown): unknown {
  const code = error instanceof SqliteWriteError ? error.code : undefined
  if (code !== undefined && (TRANSIENT_CODES.test(code) || code === 'SQLITE_WRITER_EXITED')) {
    return new StoreUnavailableError(`SQLite is unavailable (${code})`, { cause: error })
  }
  return error
}

function unlessTransient<T> (operation: () => T): T {
  try {
    return operation()
  } catch (error) {
    if (error instanceof SqliteError && TRANSIENT_CODES.test(error.code)) {
      throw new StoreUnavailableError(`SQLite is unavailable (${error.code})`, { cause: error })
    }
    throw error
  }
}
