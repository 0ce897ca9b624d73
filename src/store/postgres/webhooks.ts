import type pg from 'pg'
import {
  ATTEMPT_COLUMNS, attemptPageOf, ClaimAfterSettleError, CLAIMED_SUBSCRIPTION_COLUMNS, claimedDeliveries, claimShare, OUTBOX_COLUMNS, storedSecretsOfRow, SUBSCRIPTION_COLUMNS,
  SUBSCRIPTION_STATUS_COLUMNS, subscriptionOfRow, subscriptionStatusOfRow, type AttemptRow, type ClaimedSubscriptionRow, type OutboxRow,
  type SettledAttempt, type SubscriptionRow, type SubscriptionStatusRow, type WebhookStore
} from '../webhook-store.js'
import type { PostgresConnection } from './connection.js'

/**
 * Each enabled subscription's due rows up to its allowance ($5, lower ones in $6/$7), oldest due first,
 * then taken across subscriptions in turns (the rank within its subscription), up to $2.
 *
 * The plan must not depend on the statistics, which lag behind an outbox that fills in seconds (a plan
 * made for "one row per subscription" compared every pending row with every other: seconds per claim at
 * two thousand rows). So each subscription's rows are read in due order from webhook_outbox_subscription_due,
 * stopping at its allowance, and a row is its plant's oldest pending one when it is the min() of its plant:
 * a scalar subquery is never turned into a join, and min() reads one entry of webhook_outbox_plant.
 */
const CLAIM_OUTBOX = {
  name: 'plantstore-claim-outbox',
  text: `WITH allowance AS (
           SELECT s.id, LEAST($5::int, COALESCE(lower_limit.n, $5::int)) AS n FROM webhook_subscriptions s
           LEFT JOIN unnest($6::text[], $7::int[]) AS lower_limit (id, n) ON lower_limit.id = s.id
           WHERE s.disabled_at IS NULL),
         candidate AS (
           SELECT due.id, due.next_attempt_at,
                  row_number() OVER (PARTITION BY a.id ORDER BY due.next_attempt_at, due.id) AS turn
           FROM allowance a CROSS JOIN LATERAL (
             SELECT o.id, o.next_attempt_at FROM webhook_outbox o
             WHERE o.subscription_id = a.id AND o.failed_at IS NULL AND o.next_attempt_at <= $1 AND o.lease_until <= $1
               AND o.id = (SELECT min(e.id) FROM webhook_outbox e
                           WHERE e.subscription_id = o.subscription_id AND e.plant_id = o.plant_id AND e.failed_at IS NULL)
             ORDER BY o.next_attempt_at, o.id LIMIT a.n
             FOR UPDATE OF o SKIP LOCKED) due
           WHERE a.n > 0),
         taken AS (SELECT id FROM candidate ORDER BY turn, next_attempt_at, id LIMIT $2)
         UPDATE webhook_outbox o SET lease_until = $3, lease_owner = $4
         FROM taken, webhook_subscriptions s
         WHERE o.id = taken.id AND s.id = o.subscription_id
         RETURNING ${qualified('o', OUTBOX_COLUMNS)}, ${qualified('s', CLAIMED_SUBSCRIPTION_COLUMNS)}`
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

/** `columns` (comma-separated) each prefixed with the table alias `alias`. */
function qualified (alias: string, columns: string): string {
  return columns.split(', ').map((column) => `${alias}.${column}`).join(', ')
}

/** Webhook subscriptions and their outbox. Several instances share the outbox: see `claim`. */
export function postgresWebhookStore (connection: PostgresConnection): WebhookStore {
  return {
    async createSubscription (subscription) {
      await connection.query({
        text: 'INSERT INTO webhook_subscriptions (id, url, events, secret, created_at) VALUES ($1, $2, $3, $4, $5)',
        values: [subscription.id, subscription.url, subscription.events.join(' '), subscription.storedSecret, subscription.createdAt]
      })
    },
    async listSubscriptions () {
      const { rows } = await connection.query<SubscriptionRow>({ text: `SELECT ${SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY created_at DESC, id DESC` })
      return rows.map(subscriptionOfRow)
    },
    async getSubscription (id) {
      const { rows } = await connection.query<SubscriptionStatusRow & { pending: bigint }>({
        text: `SELECT ${SUBSCRIPTION_STATUS_COLUMNS},
                 (SELECT count(*) FROM webhook_outbox o WHERE o.subscription_id = s.id AND o.failed_at IS NULL) AS pending
               FROM webhook_subscriptions s WHERE id = $1`,
        values: [id]
      })
      const row = rows[0]
      return row === undefined ? undefined : subscriptionStatusOfRow(row, row.pending)
    },
    deleteSubscription (id) {
      return connection.transaction(async (client) => {
        await client.query('DELETE FROM webhook_outbox WHERE subscription_id = $1', [id])
        await client.query('DELETE FROM webhook_attempts WHERE subscription_id = $1', [id])
        const { rowCount } = await client.query('DELETE FROM webhook_subscriptions WHERE id = $1', [id])
        return rowCount === 1
      })
    },
    async listAttempts (subscriptionId, { after, limit }) {
      const { rows } = await connection.query<AttemptRow>(after === undefined
        ? { text: `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = $1 ORDER BY id DESC LIMIT $2`, values: [subscriptionId, limit + 1] }
        : { text: `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, values: [subscriptionId, after.toString(), limit + 1] })
      return attemptPageOf(rows, limit)
    },
    async claim (request) {
      const { owner, now, leaseMs, limit } = request
      const lower = [...request.subscriptionLimits ?? []]
      const values = [now, limit, now + leaseMs, owner, claimShare(request), lower.map(([id]) => id), lower.map(([, n]) => Math.max(0, n))]
      const claimRows = () => connection.query<OutboxRow & ClaimedSubscriptionRow>({ ...CLAIM_OUTBOX, values })
      let rows: Array<OutboxRow & ClaimedSubscriptionRow>
      if (request.settled === undefined || request.settled.length === 0) rows = (await claimRows()).rows
      else {
        // Its own transaction before the claim's, which is one statement.
        await settleAttempts(connection, owner, request.settled)
        try {
          rows = (await claimRows()).rows
        } catch (error) {
          throw new ClaimAfterSettleError(error)
        }
      }
      return claimedDeliveries(rows, new Map(rows.map((row) => [row.subscription_id, row])))
    },
    async settle (owner, attempts) {
      await settleAttempts(connection, owner, attempts)
    },
    async pruneAttempts (before) {
      const { rowCount } = await connection.query({ text: 'DELETE FROM webhook_attempts WHERE at < $1', values: [before] })
      return rowCount ?? 0
    },
    async backlog () {
      const { rows } = await connection.query<{ pending: bigint, oldest: bigint | null }>({
        text: 'SELECT count(*) AS pending, min(created_at) AS oldest FROM webhook_outbox WHERE failed_at IS NULL'
      })
      const { pending = 0n, oldest = null } = rows[0] ?? {}
      return oldest === null ? { pending: Number(pending) } : { pending: Number(pending), oldestRecordedAt: Number(oldest) }
    },
    async storedSecrets () {
      const { rows } = await connection.query<{ id: string } & Omit<ClaimedSubscriptionRow, 'url'>>({
        text: 'SELECT id, secret, previous_secret, previous_secret_until FROM webhook_subscriptions ORDER BY id'
      })
      return rows.map(storedSecretsOfRow)
    },
    async rotateSecret (id, storedSecret, previousSecretUntil) {
      // The right-hand sides read the row as it was: the secret replaced becomes the previous one.
      const { rowCount } = await connection.query({
        text: `UPDATE webhook_subscriptions SET secret = $2,
                 previous_secret = CASE WHEN $3::bigint IS NULL THEN NULL ELSE secret END, previous_secret_until = $3::bigint
               WHERE id = $1`,
        values: [id, storedSecret, previousSecretUntil ?? null]
      })
      return rowCount === 1
    },
    replaceStoredSecrets (replacements) {
      return connection.transaction(async (client) => {
        let replaced = 0
        for (const { id, column, from, to } of replacements) {
          const { rowCount } = await client.query(column === 'secret'
            ? 'UPDATE webhook_subscriptions SET secret = $3 WHERE id = $1 AND secret = $2'
            : 'UPDATE webhook_subscriptions SET previous_secret = $3, previous_secret_until = CASE WHEN $3::text IS NULL THEN NULL ELSE previous_secret_until END WHERE id = $1 AND previous_secret = $2',
          [id, from, to])
          replaced += rowCount ?? 0
        }
        return replaced
      })
    }
  }
}

/** Records the attempts and their results in one transaction (the store's `settle`). */
async function settleAttempts (connection: PostgresConnection, owner: string, attempts: readonly SettledAttempt[]): Promise<void> {
  if (attempts.length === 0) return
  await connection.transaction(async (client) => {
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
