import type { SqliteDatabase } from './driver.js'
import { asUnavailable, unlessTransient } from './transient-errors.js'
import { writerExited, type SqliteWriter } from './writer.js'
import type { SettledAttemptRecord, WebhookArguments, WebhookCommand, WebhookResults } from './writer-protocol.js'
import {
  ATTEMPT_COLUMNS, attemptPageOf, ClaimAfterSettleError, CLAIMED_SUBSCRIPTION_COLUMNS, claimedDeliveries, storedSecretsOfRow, SUBSCRIPTION_COLUMNS,
  SUBSCRIPTION_STATUS_COLUMNS, subscriptionOfRow, subscriptionStatusOfRow, type AttemptRow, type ClaimedDelivery, type ClaimedSubscriptionRow,
  type SettledAttempt, type SubscriptionRow, type SubscriptionStatusRow, type WebhookStore
} from '../webhook-store.js'

/** What the writer records of an attempt: its delivery's body, URL and secrets stay on this thread. */
function settledRecordOf ({ delivery, ...outcome }: SettledAttempt): SettledAttemptRecord {
  return {
    ...outcome,
    delivery: { id: delivery.id, subscriptionId: delivery.subscriptionId, eventId: delivery.eventId, type: delivery.type, attempts: delivery.attempts }
  }
}

/**
 * Webhook subscriptions and their outbox: read on this thread's connection, written by the writer
 * thread (its webhook commands), so that neither the dispatcher nor an admin request holds the event
 * loop while another connection has the database locked.
 */
export function sqliteWebhookStore (db: SqliteDatabase, writer: SqliteWriter): WebhookStore {
  const selectAll = db.prepare<[], SubscriptionRow>(`SELECT ${SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY created_at DESC, id DESC`)
  const selectOne = db.prepare<[string], SubscriptionStatusRow>(`SELECT ${SUBSCRIPTION_STATUS_COLUMNS} FROM webhook_subscriptions WHERE id = ?`)
  const countPending = db.prepare<[string], bigint>(
    'SELECT count(*) FROM webhook_outbox WHERE subscription_id = ? AND failed_at IS NULL').pluck(true)
  const attemptsFirst = db.prepare<[string, number], AttemptRow>(
    `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = ? ORDER BY id DESC LIMIT ?`)
  const attemptsAfter = db.prepare<[string, bigint, number], AttemptRow>(
    `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = ? AND id < ? ORDER BY id DESC LIMIT ?`)
  const secrets = db.prepare<[], { id: string } & ClaimedSubscriptionRow>(`SELECT id, ${CLAIMED_SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions ORDER BY id`)
  const backlog = db.prepare<[], { pending: number, oldest: number | bigint | null }>(
    'SELECT count(*) AS pending, min(created_at) AS oldest FROM webhook_outbox WHERE failed_at IS NULL')
  // Spares the writer thread a transaction when nothing is due, which is most of the dispatcher's polls.
  const anyDue = db.prepare<[bigint, bigint], number>(
    'SELECT 1 FROM webhook_outbox WHERE failed_at IS NULL AND next_attempt_at <= ? AND lease_until <= ? LIMIT 1').pluck(true)
  const command = async <Command extends WebhookCommand> (name: Command, argument: WebhookArguments[Command]): Promise<WebhookResults[Command]> => {
    try {
      return await writer.webhookCommand(name, argument)
    } catch (error) {
      throw asUnavailable(error)
    }
  }

  /** The deliveries of the rows a claim leased, each with its subscription's URL and secrets. */
  const claimedOf = (rows: WebhookResults['claim']): ClaimedDelivery[] => rows.length === 0
    ? []
    : claimedDeliveries(rows, new Map(unlessTransient(() => secrets.all()).map((row) => [row.id, row])))

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
      return await command('deleteSubscription', id)
    },
    async listAttempts (subscriptionId, { after, limit }) {
      const rows = unlessTransient(() => after === undefined
        ? attemptsFirst.all(subscriptionId, limit + 1)
        : attemptsAfter.all(subscriptionId, after, limit + 1))
      return attemptPageOf(rows, limit)
    },
    async claim ({ settled, ...request }): Promise<ClaimedDelivery[]> {
      if (settled === undefined || settled.length === 0) {
        const now = BigInt(request.now)
        if (unlessTransient(() => anyDue.get(now, now)) === undefined) return []
        return claimedOf(await command('claim', request))
      }
      let rows: WebhookResults['claim']
      try {
        rows = await writer.webhookCommand('claim', { ...request, settled: settled.map(settledRecordOf) })
      } catch (error) {
        // A writer that exited may have committed them: recorded twice, a retry's outcome would count twice.
        // Not recorded, their rows are leased until the lease ends, and then delivered again.
        throw writerExited(error) ? new ClaimAfterSettleError(asUnavailable(error)) : asUnavailable(error)
      }
      try {
        return claimedOf(rows)
      } catch (error) {
        throw new ClaimAfterSettleError(error)
      }
    },
    async settle (owner, attempts) {
      // Only what the writer records crosses to its thread: copying bodies, URLs and secrets there cost
      // a fifth of the dispatcher's time (bench/results/2026-11-26-1412-issue-26-fast-day-costs.md).
      if (attempts.length === 0) return
      await command('settle', { owner, attempts: attempts.map(settledRecordOf) })
    },
    async pruneAttempts (before) {
      return await command('pruneAttempts', before)
    },
    async backlog () {
      const { pending, oldest } = unlessTransient(() => backlog.get()) as { pending: number, oldest: number | bigint | null }
      return oldest === null ? { pending: Number(pending) } : { pending: Number(pending), oldestRecordedAt: Number(oldest) }
    },
    async storedSecrets () {
      return unlessTransient(() => secrets.all()).map(storedSecretsOfRow)
    },
    async rotateSecret (id, storedSecret, previousSecretUntil) {
      return await command('rotateSecret', { id, storedSecret, previousSecretUntil })
    },
    async replaceStoredSecrets (replacements) {
      return replacements.length === 0 ? 0 : await command('replaceStoredSecrets', replacements)
    }
  }
}
