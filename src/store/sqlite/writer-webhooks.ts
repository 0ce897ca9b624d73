import type { SqliteDatabase } from './driver.js'
import type { SettledAttemptRecord, Settlement, WebhookArguments, WebhookCommands } from './writer-protocol.js'
import { claimAllowance, OUTBOX_COLUMNS, takeInTurns, type NewWebhookSubscriptionRecord, type OutboxRow } from '../webhook-store.js'

const PRUNE_CHUNK = 1000
/** How many of the oldest due rows a claim reads before it looks for a subscription's rows one by one. */
const DUE_WINDOW = 1024

interface DueRow {
  readonly id: bigint
  readonly subscription_id: string
  readonly plant_id: bigint
  readonly next_attempt_at: number | bigint
  readonly lease_until: number | bigint
}

/**
 * The writer thread's webhook writes: subscriptions, and the dispatcher's leases and outcomes. They
 * run there so that neither the dispatcher nor an admin request holds the event loop while another
 * connection has the database locked.
 */
export function webhookWrites (db: SqliteDatabase): WebhookCommands {
  const createSubscription = db.prepare<[string, string, string, string, number]>(
    'INSERT INTO webhook_subscriptions (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)')
  const deleteOutbox = db.prepare<[string]>('DELETE FROM webhook_outbox WHERE subscription_id = ?')
  const deleteAttempts = db.prepare<[string]>('DELETE FROM webhook_attempts WHERE subscription_id = ?')
  const deleteSubscription = db.prepare<[string]>('DELETE FROM webhook_subscriptions WHERE id = ?')
  const enabledSubscriptions = db.prepare<[], string>('SELECT id FROM webhook_subscriptions WHERE disabled_at IS NULL').pluck()
  // The oldest due rows of every subscription: most claims find what they may take among them.
  const oldestDue = db.prepare<[number, number], DueRow>(`
    SELECT o.id, o.subscription_id, o.plant_id, o.next_attempt_at, o.lease_until FROM webhook_outbox o INDEXED BY webhook_outbox_due
    WHERE o.failed_at IS NULL AND o.next_attempt_at <= ? ORDER BY o.next_attempt_at, o.id LIMIT ?`)
  const earlierPending = db.prepare<[string, bigint, bigint], number>(
    'SELECT 1 FROM webhook_outbox WHERE subscription_id = ? AND plant_id = ? AND id < ? AND failed_at IS NULL LIMIT 1').pluck()
  // One subscription's oldest due rows, in due order: for one whose due rows are not among the oldest
  // (behind another's backlog), reading no more of its own backlog than it takes.
  const dueOfSubscription = db.prepare<[{ subscription: string, now: number, limit: number }], DueRow>(`
    SELECT o.id, o.subscription_id, o.plant_id, o.next_attempt_at, o.lease_until FROM webhook_outbox o INDEXED BY webhook_outbox_subscription_due
    WHERE o.subscription_id = :subscription AND o.failed_at IS NULL AND o.next_attempt_at <= :now AND o.lease_until <= :now
      AND NOT EXISTS (SELECT 1 FROM webhook_outbox e WHERE e.subscription_id = o.subscription_id AND e.plant_id = o.plant_id
                      AND e.id < o.id AND e.failed_at IS NULL)
    ORDER BY o.next_attempt_at, o.id LIMIT :limit`)
  const lease = db.prepare<[number, string, bigint], OutboxRow>(
    `UPDATE webhook_outbox SET lease_until = ?, lease_owner = ? WHERE id = ? RETURNING ${OUTBOX_COLUMNS}`)
  const claim = db.transaction((request: WebhookArguments['claim']): OutboxRow[] => {
    const { now } = request
    if (request.settled !== undefined) settleAll(request.owner, request.settled)
    const allowances = new Map(enabledSubscriptions.all().map((subscription) => [subscription, claimAllowance(request, subscription)]))
    const found = new Map<string, DueRow[]>()
    // The scan stops as soon as every subscription has its allowance: behind a long backlog's leased
    // head, reading the whole window at every claim cost more than the deliveries it started.
    let wanted = 0
    for (const allowance of allowances.values()) wanted += allowance
    let read = 0
    for (const row of oldestDue.iterate(now, DUE_WINDOW)) {
      read++
      const rows = found.get(row.subscription_id) ?? []
      if (rows.length >= (allowances.get(row.subscription_id) ?? 0) || Number(row.lease_until) > now) continue
      if (earlierPending.get(row.subscription_id, row.plant_id, row.id) !== undefined) continue
      found.set(row.subscription_id, [...rows, row])
      if (--wanted === 0) break
    }
    const windowFull = wanted > 0 && read === DUE_WINDOW
    const candidates = [...allowances].map(([subscription, allowance]) => {
      const rows = found.get(subscription) ?? []
      // Past a full window, more of its due rows may follow.
      const more = windowFull && rows.length < allowance ? dueOfSubscription.all({ subscription, now, limit: allowance }) : rows
      return more.map((row) => ({ id: row.id, nextAttemptAt: Number(row.next_attempt_at) }))
    })
    const leaseUntil = now + request.leaseMs
    return takeInTurns(candidates, request.limit).map(({ id }) => lease.get(leaseUntil, request.owner, id) as OutboxRow)
  })
  const leased = db.prepare<[bigint, string]>('SELECT 1 FROM webhook_outbox WHERE id = ? AND lease_owner = ?').pluck()
  const subscriptionExists = db.prepare<[string]>('SELECT 1 FROM webhook_subscriptions WHERE id = ?').pluck()
  const deliveredIfLeased = db.prepare<[bigint, string]>('DELETE FROM webhook_outbox WHERE id = ? AND lease_owner = ?')
  const countDelivered = db.prepare<[number, string]>('UPDATE webhook_subscriptions SET delivered = delivered + ? WHERE id = ?')
  const retryLater = db.prepare<[number | undefined, bigint]>(
    'UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = ?, lease_until = 0, lease_owner = NULL WHERE id = ?')
  const failOne = db.prepare<[number, bigint]>(
    'UPDATE webhook_outbox SET attempts = attempts + 1, failed_at = ?, lease_until = 0, lease_owner = NULL WHERE id = ?')
  const failPending = db.prepare<[number, string]>(
    'UPDATE webhook_outbox SET failed_at = ? WHERE subscription_id = ? AND failed_at IS NULL')
  const noteError = db.prepare<[string, number, number, string]>(
    'UPDATE webhook_subscriptions SET last_error = ?, last_error_at = ?, failed = failed + ? WHERE id = ?')
  const disable = db.prepare<[number, string, string]>(
    'UPDATE webhook_subscriptions SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL')
  const insertAttempt = db.prepare<[string, string, string, number, number | null, string | null, number]>(
    'INSERT INTO webhook_attempts (subscription_id, event_id, event_type, attempt, status_code, error, at) VALUES (?, ?, ?, ?, ?, ?, ?)')
  // The right-hand sides read the row as it was: the secret replaced becomes the previous one.
  const rotateSecret = db.prepare<{ id: string, secret: string, until: number | null }>(`
    UPDATE webhook_subscriptions SET secret = :secret,
      previous_secret = CASE WHEN :until IS NULL THEN NULL ELSE secret END, previous_secret_until = :until
    WHERE id = :id`)
  const replaceSecret = db.prepare<[string | null, string, string]>('UPDATE webhook_subscriptions SET secret = ? WHERE id = ? AND secret = ?')
  const replacePreviousSecret = db.prepare<{ to: string | null, id: string, from: string }>(`
    UPDATE webhook_subscriptions SET previous_secret = :to,
      previous_secret_until = CASE WHEN :to IS NULL THEN NULL ELSE previous_secret_until END
    WHERE id = :id AND previous_secret = :from`)
  const pruneAttempts = db.prepare<[number]>(
    `DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts ORDER BY id LIMIT ${PRUNE_CHUNK}) AND at < ?`)

  /**
   * Records one attempt; a delivered one is counted in `deliveredOf`, whose counts the batch writes once per
   * subscription (-1: the subscription is gone).
   */
  const settleOne = (owner: string, { delivery, at, statusCode, error, result, nextAttemptAt }: SettledAttemptRecord, deliveredOf: Map<string, number>) => {
    const count = deliveredOf.get(delivery.subscriptionId)
    if (count === -1) return
    if (count === undefined) {
      const exists = subscriptionExists.get(delivery.subscriptionId) !== undefined
      deliveredOf.set(delivery.subscriptionId, exists ? 0 : -1)
      if (!exists) return
    }
    insertAttempt.run(delivery.subscriptionId, delivery.eventId, delivery.type, delivery.attempts + 1, statusCode ?? null, error ?? null, at)
    if (result === 'delivered') {
      if (deliveredIfLeased.run(delivery.id, owner).changes === 1) deliveredOf.set(delivery.subscriptionId, (count ?? 0) + 1)
      return
    }
    if (leased.get(delivery.id, owner) === undefined) return
    const message = error ?? `HTTP ${statusCode}`
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
  const settleAll = (owner: string, attempts: readonly SettledAttemptRecord[]) => {
    // A subscription deleted meanwhile is looked up once a batch; its attempts are not recorded.
    const deliveredOf = new Map<string, number>()
    for (const attempt of attempts) settleOne(owner, attempt, deliveredOf)
    for (const [subscriptionId, count] of deliveredOf) if (count > 0) countDelivered.run(count, subscriptionId)
  }
  const settle = db.transaction(({ owner, attempts }: Settlement) => { settleAll(owner, attempts) })

  // Leases and outcomes are worth a redelivery at most: their commits need not wait for the disk.
  // (exec: a pragma takes effect as it is prepared, so it cannot be a prepared statement, and pragma()
  // prepares one and reads its rows, at three times exec's cost.)
  const relaxed = <Result>(work: () => Result): Result => {
    db.exec('PRAGMA synchronous = NORMAL')
    try {
      return work()
    } finally {
      db.exec('PRAGMA synchronous = FULL')
    }
  }

  return {
    createSubscription: db.transaction((subscription: NewWebhookSubscriptionRecord) => {
      createSubscription.run(subscription.id, subscription.url, subscription.events.join(' '), subscription.storedSecret, subscription.createdAt)
    }),
    deleteSubscription: db.transaction((id: string) => {
      deleteOutbox.run(id)
      deleteAttempts.run(id)
      return deleteSubscription.run(id).changes === 1
    }),
    rotateSecret: db.transaction(({ id, storedSecret, previousSecretUntil }: WebhookArguments['rotateSecret']) =>
      rotateSecret.run({ id, secret: storedSecret, until: previousSecretUntil ?? null }).changes === 1),
    replaceStoredSecrets: db.transaction((replacements: WebhookArguments['replaceStoredSecrets']) => {
      let replaced = 0
      for (const { id, column, from, to } of replacements) {
        replaced += column === 'secret' ? replaceSecret.run(to, id, from).changes : replacePreviousSecret.run({ to, id, from }).changes
      }
      return replaced
    }),
    claim: (request) => relaxed(() => claim.immediate(request)),
    settle: (settlement) => relaxed(() => settle.immediate(settlement)),
    pruneAttempts: (before) => relaxed(() => {
      let deleted = 0
      for (let changes = PRUNE_CHUNK; changes === PRUNE_CHUNK; deleted += changes) changes = pruneAttempts.run(before).changes
      return deleted
    })
  }
}
