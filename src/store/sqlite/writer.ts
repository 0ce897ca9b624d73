import { Worker } from 'node:worker_threads'
import type { PlantRow } from '../plant-store.js'
import { sqliteDriverPath } from './driver.js'
import type { WriteOperation } from '../write-operations.js'

/**
 * What the writer thread reports for one write: a create stored, or the row it met; for a change, the
 * row its id had before it (its outcome follows from that row and `decideChange`).
 */
export type WriteEffect =
  | { readonly inserted: true }
  | { readonly inserted: false, readonly existing: PlantRow | undefined }
  | { readonly before: PlantRow | undefined }

export class SqliteWriteError extends Error {
  constructor (readonly code: string | undefined, message: string) {
    super(message)
    this.name = 'SqliteWriteError'
  }
}

export interface SqliteWriterOptions {
  readonly file: string
  readonly busyTimeoutMs: number
}

// Runs in the worker thread. It executes statements in one transaction per batch; what the results mean
// (created, replayed, conflict, stale, …) is decided by the adapter on the main thread. A change applies
// the rules of decideChange (write-operations.ts) to its row: a conditional one only while the row is
// the expected one; a put stores its plant; a patch merges into an existing row; a delete removes it.
// A write that changed a row records its event in the same transaction, one outbox row per enabled
// subscription that wants it. The webhook dispatcher's bookkeeping runs here too (webhookCommands), so
// no write of this process ever waits for SQLite's lock on the event loop.
const WRITER_SOURCE = `
import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'
const Database = createRequire(workerData.driverPath)(workerData.driverPath)
const db = new Database(workerData.file)
db.pragma('journal_mode = WAL')
db.pragma('synchronous = FULL')
db.pragma('busy_timeout = ' + workerData.busyTimeoutMs)
// Durability rests on this connection's settings: refuse to write at all without them.
if (db.pragma('journal_mode', { simple: true }) !== 'wal' || db.pragma('synchronous', { simple: true }) !== 2) {
  throw new Error('the SQLite writer could not set journal_mode=WAL and synchronous=FULL')
}
db.defaultSafeIntegers(true)
const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING')
const select = db.prepare('SELECT id, name, tag FROM plants WHERE id = ?')
const rename = db.prepare('UPDATE plants SET name = ? WHERE id = ?')
const update = db.prepare('UPDATE plants SET name = ?, tag = ? WHERE id = ?')
const remove = db.prepare('DELETE FROM plants WHERE id = ?')
const subscriptions = db.prepare('SELECT id, events FROM webhook_subscriptions WHERE disabled_at IS NULL')
const insertOutbox = db.prepare('INSERT INTO webhook_outbox (subscription_id, event_id, event_type, plant_id, body, created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
const tagOf = (plant) => plant.tag === undefined ? null : plant.tag
const isRow = (row, plant) => row === undefined ? plant === undefined : plant !== undefined && row.name === plant.name && row.tag === tagOf(plant)
const documentOf = (id, name, tag) => '{"id":' + id + ',"name":' + JSON.stringify(name) + (tag === null ? '' : ',"tag":' + JSON.stringify(tag)) + '}'
// The enabled subscriptions of the batch being written, read once per transaction.
let subscribers = []
function recordEvent (type, id, body) {
  let eventId
  const now = Date.now()
  for (const subscriber of subscribers) {
    if (!(' ' + subscriber.events + ' ').includes(' ' + type + ' ')) continue
    eventId ??= 'msg_' + randomUUID().replaceAll('-', '')
    insertOutbox.run(subscriber.id, eventId, type, id, body, now, now)
  }
}
// Writes only what changed: an update that leaves the tag alone leaves the tag index alone too.
function store (id, before, name, tag) {
  if (before === undefined) insert.run(id, name, tag)
  else if (before.tag !== tag) update.run(name, tag, id)
  else if (before.name !== name) rename.run(name, id)
  else return
  recordEvent(before === undefined ? 'plant.created' : 'plant.updated', id, documentOf(id, name, tag))
}
function change (operation) {
  const id = operation.kind === 'put' ? operation.plant.id : operation.id
  const before = select.get(id)
  if (operation.expected !== undefined && !isRow(before, operation.expected.plant)) return { before }
  if (operation.kind === 'delete') {
    if (before !== undefined) {
      remove.run(id)
      recordEvent('plant.deleted', id, '{"id":' + id + '}')
    }
  } else if (operation.kind === 'put') {
    store(id, before, operation.plant.name, tagOf(operation.plant))
  } else if (before !== undefined) {
    const { name = before.name, tag = before.tag } = operation.patch
    store(id, before, name, tag)
  }
  return { before }
}
const write = db.transaction((operations) => {
  subscribers = subscriptions.all()
  return operations.map((operation) => {
    if (operation.kind !== 'create') return change(operation)
    const { id, name, tag } = operation.plant
    if (insert.run(id, name, tagOf(operation.plant)).changes === 1) {
      recordEvent('plant.created', id, documentOf(id, name, tagOf(operation.plant)))
      return { inserted: true }
    }
    return { inserted: false, existing: select.get(id) }
  })
})

const createSubscription = db.prepare('INSERT INTO webhook_subscriptions (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)')
const deleteOutbox = db.prepare('DELETE FROM webhook_outbox WHERE subscription_id = ?')
const deleteAttempts = db.prepare('DELETE FROM webhook_attempts WHERE subscription_id = ?')
const deleteSubscription = db.prepare('DELETE FROM webhook_subscriptions WHERE id = ?')
const claim = db.prepare(\`UPDATE webhook_outbox SET lease_until = :leaseUntil, lease_owner = :owner
  WHERE id IN (
    SELECT o.id FROM webhook_outbox o JOIN webhook_subscriptions s ON s.id = o.subscription_id AND s.disabled_at IS NULL
    WHERE o.failed_at IS NULL AND o.next_attempt_at <= :now AND o.lease_until <= :now
      AND NOT EXISTS (SELECT 1 FROM webhook_outbox e WHERE e.subscription_id = o.subscription_id AND e.plant_id = o.plant_id
                      AND e.id < o.id AND e.failed_at IS NULL)
    ORDER BY o.next_attempt_at, o.id LIMIT :limit)
  RETURNING id, subscription_id, event_id, event_type, plant_id, body, created_at, attempts\`)
const leased = db.prepare('SELECT 1 FROM webhook_outbox WHERE id = ? AND lease_owner = ?').pluck()
const subscriptionExists = db.prepare('SELECT 1 FROM webhook_subscriptions WHERE id = ?').pluck()
const delivered = db.prepare('DELETE FROM webhook_outbox WHERE id = ?')
const countDelivered = db.prepare('UPDATE webhook_subscriptions SET delivered = delivered + 1 WHERE id = ?')
const retryLater = db.prepare('UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = ?, lease_until = 0, lease_owner = NULL WHERE id = ?')
const failOne = db.prepare('UPDATE webhook_outbox SET attempts = attempts + 1, failed_at = ?, lease_until = 0, lease_owner = NULL WHERE id = ?')
const failPending = db.prepare('UPDATE webhook_outbox SET failed_at = ? WHERE subscription_id = ? AND failed_at IS NULL')
const noteError = db.prepare('UPDATE webhook_subscriptions SET last_error = ?, last_error_at = ?, failed = failed + ? WHERE id = ?')
const disable = db.prepare('UPDATE webhook_subscriptions SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL')
const insertAttempt = db.prepare('INSERT INTO webhook_attempts (subscription_id, event_id, event_type, attempt, status_code, error, at) VALUES (?, ?, ?, ?, ?, ?, ?)')
const pruneAttempts = db.prepare('DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts ORDER BY id LIMIT 1000) AND at < ?')
function settleOne (owner, { delivery, at, statusCode, error, result, nextAttemptAt }) {
  if (subscriptionExists.get(delivery.subscriptionId) === undefined) return
  insertAttempt.run(delivery.subscriptionId, delivery.eventId, delivery.type, delivery.attempts + 1, statusCode ?? null, error ?? null, at)
  if (leased.get(delivery.id, owner) === undefined) return
  if (result === 'delivered') {
    delivered.run(delivery.id)
    countDelivered.run(delivery.subscriptionId)
    return
  }
  const message = error ?? 'HTTP ' + statusCode
  if (result === 'retry') {
    retryLater.run(nextAttemptAt, delivery.id)
    noteError.run(message, at, 0, delivery.subscriptionId)
    return
  }
  failOne.run(at, delivery.id)
  let failures = 1
  if (result === 'gone' && disable.run(at, 'the receiver answered 410 Gone', delivery.subscriptionId).changes === 1) {
    failures += failPending.run(at, delivery.subscriptionId).changes
  }
  noteError.run(message, at, failures, delivery.subscriptionId)
}
const settle = db.transaction((owner, attempts) => { for (const attempt of attempts) settleOne(owner, attempt) })
// Leases and outcomes are worth a redelivery at most: their commits need not wait for the disk.
function relaxed (work) {
  db.pragma('synchronous = NORMAL')
  try {
    return work()
  } finally {
    db.pragma('synchronous = FULL')
  }
}
const webhookCommands = {
  createSubscription: db.transaction((subscription) => {
    createSubscription.run(subscription.id, subscription.url, subscription.events.join(' '), subscription.storedSecret, subscription.createdAt)
  }),
  deleteSubscription: db.transaction((id) => {
    deleteOutbox.run(id)
    deleteAttempts.run(id)
    return deleteSubscription.run(id).changes === 1
  }),
  claim: ({ owner, now, leaseMs, limit }) => relaxed(() => claim.all({ owner, now, leaseUntil: now + leaseMs, limit })),
  settle: ({ owner, attempts }) => relaxed(() => settle.immediate(owner, attempts)),
  pruneAttempts: (before) => relaxed(() => {
    let deleted = 0
    for (let changes = 1000; changes === 1000; deleted += changes) changes = pruneAttempts.run(before).changes
    return deleted
  })
}
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close()
    parentPort.close()
    return
  }
  try {
    const result = message.operations !== undefined
      ? write.immediate(message.operations)
      : webhookCommands[message.command](message.argument)
    parentPort.postMessage({ result })
  } catch (error) {
    parentPort.postMessage({ error: { code: error.code, message: error.message } })
  }
})
`

/**
 * The SQLite writer: a worker thread with its own connection that commits each batch (synchronous=FULL,
 * so the commit's fsync happens there). The event loop keeps serving requests, and gathering the next
 * batch, while a commit is on its way to the disk.
 */
export class SqliteWriter {
  private worker: Worker | undefined
  /** The answers the worker owes, in the order it will give them (it handles one message at a time). */
  private readonly pending: Array<{ resolve: (result: unknown) => void, reject: (error: Error) => void }> = []

  constructor (private readonly options: SqliteWriterOptions) {}

  /** Commits one batch of plant writes; at most one is in flight (the group commit sees to that). */
  write (operations: readonly WriteOperation[]): Promise<WriteEffect[]> {
    return this.send({ operations }) as Promise<WriteEffect[]>
  }

  /** Runs one of the writer's webhook commands (see webhookCommands in WRITER_SOURCE) in its own transaction. */
  webhookCommand (command: WebhookCommand, argument: unknown): Promise<unknown> {
    return this.send({ command, argument })
  }

  async close (): Promise<void> {
    const worker = this.worker
    if (worker === undefined) return
    this.worker = undefined
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    worker.postMessage('close')
    await exited
  }

  private send (message: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const worker = this.running()
      this.pending.push({ resolve, reject })
      worker.postMessage(message)
    })
  }

  private running (): Worker {
    if (this.worker !== undefined) return this.worker
    const worker = new Worker(WRITER_SOURCE, {
      eval: true,
      workerData: { ...this.options, driverPath: sqliteDriverPath }
    })
    worker.on('message', (message: { result?: unknown, error?: { code?: string, message: string } }) => {
      const pending = this.pending.shift()
      if (message.error === undefined) pending?.resolve(message.result)
      else pending?.reject(new SqliteWriteError(message.error.code, message.error.message))
    })
    // A writer that dies fails what it owes; the next message starts a new one.
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = undefined
      for (const pending of this.pending.splice(0)) pending.reject(new SqliteWriteError('SQLITE_WRITER_EXITED', error.message))
    }
    worker.on('error', fail)
    worker.on('exit', (code) => { if (this.pending.length > 0) fail(new Error(`the SQLite writer exited with code ${code}`)) })
    worker.unref()
    this.worker = worker
    return worker
  }
}

export type WebhookCommand = 'createSubscription' | 'deleteSubscription' | 'claim' | 'settle' | 'pruneAttempts'
