/**
 * The part of the storage port that keeps webhook subscriptions and their outbox (docs/reference/api/webhooks.md).
 * The plant writes record their events themselves, in their own transaction: one outbox row per
 * subscription that wants the event, written only when the write changed something. The dispatcher
 * claims due rows, delivers them and settles the outcome here.
 *
 * Times are milliseconds since the epoch, taken from the caller's clock, on every backend.
 */
import { randomUUID } from 'node:crypto'

export const WEBHOOK_EVENT_TYPES = ['plant.created', 'plant.updated', 'plant.deleted'] as const
export type WebhookEventType = typeof WEBHOOK_EVENT_TYPES[number]

export interface WebhookSubscriptionRecord {
  readonly id: string
  readonly url: string
  readonly events: readonly WebhookEventType[]
  readonly createdAt: number
  /** Set when the receiver answered `410 Gone`: nothing is recorded or delivered for it any more. */
  readonly disabledAt?: number
  readonly disabledReason?: string
}

export interface NewWebhookSubscriptionRecord extends WebhookSubscriptionRecord {
  /** The signing secret as stored: sealed with WEBHOOK_SECRETS_KEY, or as it is when no key is set. */
  readonly storedSecret: string
}

export interface WebhookSubscriptionStatusRecord extends WebhookSubscriptionRecord {
  /** Events waiting for delivery, retries included. */
  readonly pending: number
  readonly delivered: number
  /** Events given up on (24 h of retries) or dropped when the subscription was disabled. */
  readonly failed: number
  readonly lastError?: { readonly at: number, readonly message: string }
  /** Until when the secret a rotation replaced is still used (epoch ms); absent when no rotation kept one. */
  readonly previousSecretUntil?: number
}

export interface DeliveryAttemptRecord {
  readonly id: bigint
  readonly eventId: string
  readonly type: WebhookEventType
  readonly attempt: number
  readonly statusCode?: number
  readonly error?: string
  readonly at: number
}

export interface DeliveryAttemptRecordPage {
  readonly attempts: readonly DeliveryAttemptRecord[]
  /** The last attempt id on this page when older ones follow. */
  readonly nextAfter?: bigint
}

/** An outbox row claimed by one dispatcher for the length of its lease. */
export interface ClaimedDelivery {
  readonly id: bigint
  readonly subscriptionId: string
  readonly url: string
  readonly storedSecret: string
  /** The secret a rotation replaced, as stored, while its grace period lasts: deliveries are signed with both. */
  readonly storedPreviousSecret?: string
  /** When the previous secret stops being used (epoch ms). */
  readonly previousSecretUntil?: number
  readonly eventId: string
  readonly type: WebhookEventType
  readonly plantId: bigint
  readonly body: string
  /** When the write that caused the event committed. */
  readonly createdAt: number
  /** Attempts made before this one. */
  readonly attempts: number
}

/** What became of one attempt, as the dispatcher settles it. */
export interface SettledAttempt {
  readonly delivery: ClaimedDelivery
  readonly at: number
  readonly statusCode?: number
  readonly error?: string
  /**
   * `delivered`: done. `retry`: due again at `nextAttemptAt`. `failed`: given up on. `gone`: the
   * receiver answered 410, so the subscription is disabled and its pending events fail with it.
   */
  readonly result: 'delivered' | 'retry' | 'failed' | 'gone'
  readonly nextAttemptAt?: number
}

export interface ClaimRequest {
  /** Who claims: a lease held by another owner is left alone until it runs out. */
  readonly owner: string
  readonly now: number
  readonly leaseMs: number
  readonly limit: number
  /** At most this many rows of one subscription (default: `limit`). */
  readonly perSubscription?: number
  /**
   * Lower caps for some subscriptions, below `perSubscription`: what is left of their share while some of
   * their attempts are under way, 0 while their circuit is open (src/webhooks/delivery-shares.ts).
   */
  readonly subscriptionLimits?: ReadonlyMap<string, number>
  /**
   * Outcomes of `owner`'s attempts to settle first (as `settle` does), in the claim's transaction where
   * the backend can: one transaction rather than two, and the claim does not read past rows just delivered.
   * A claim failing after they committed (in a transaction of their own, PostgreSQL) or maybe committed (a
   * SQLite writer that exited meanwhile) throws ClaimAfterSettleError.
   */
  readonly settled?: readonly SettledAttempt[]
}

/**
 * A claim failed after the outcomes it carried were recorded, or may have been: they are not to be
 * recorded again (an unrecorded delivery is sent again once its lease ends). `cause` is why the claim failed.
 */
export class ClaimAfterSettleError extends Error {
  constructor (cause: unknown) {
    super('the delivery outcomes were recorded, but the claim after them failed', { cause })
  }
}

/** What a claim's shares are made of. */
type ClaimLimits = Pick<ClaimRequest, 'limit' | 'perSubscription' | 'subscriptionLimits'>

/** How many rows of one subscription a claim may take at most. */
export function claimShare (request: ClaimLimits): number {
  return Math.min(request.perSubscription ?? request.limit, request.limit)
}

/** How many rows of `subscriptionId` a claim may take. */
export function claimAllowance (request: ClaimLimits, subscriptionId: string): number {
  const share = claimShare(request)
  return Math.max(0, Math.min(share, request.subscriptionLimits?.get(subscriptionId) ?? share))
}

/**
 * Up to `limit` of the candidates, taken in turns: every subscription's oldest due row first, then every
 * one's second, and so on (oldest due first within a turn), so a subscription with a long backlog cannot
 * crowd out the others. `candidates` holds each subscription's rows oldest due first.
 */
export function takeInTurns<Row extends { readonly nextAttemptAt: number, readonly id: bigint }> (
  candidates: ReadonlyArray<readonly Row[]>,
  limit: number
): Row[] {
  const taken: Row[] = []
  for (let turn = 0; taken.length < limit; turn++) {
    const inTurn = candidates.map((rows) => rows[turn]).filter((row): row is Row => row !== undefined)
    if (inTurn.length === 0) break
    inTurn.sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    taken.push(...inTurn.slice(0, limit - taken.length))
  }
  return taken
}

/** A subscription's signing secrets as stored, for the start's check and for `plantstore webhooks reseal`. */
export interface StoredSecrets {
  readonly id: string
  readonly storedSecret: string
  readonly storedPreviousSecret?: string
  /** When the previous secret stops being used (epoch ms); a later one replaces it, a rotation without grace clears it. */
  readonly previousSecretUntil?: number
}

/**
 * One stored secret to replace (sealed under another key, or dropped: `to` null), only if it still holds
 * `from`, so that a rotation made meanwhile is never undone.
 */
export interface StoredSecretReplacement {
  readonly id: string
  readonly column: 'secret' | 'previousSecret'
  readonly from: string
  readonly to: string | null
}

export interface WebhookStore {
  createSubscription (subscription: NewWebhookSubscriptionRecord): Promise<void>
  /** Every subscription, newest first. */
  listSubscriptions (): Promise<WebhookSubscriptionRecord[]>
  getSubscription (id: string): Promise<WebhookSubscriptionStatusRecord | undefined>
  /** Deletes the subscription with its outbox rows and attempts; false when there is none. */
  deleteSubscription (id: string): Promise<boolean>
  /** Attempts of one subscription, newest first, older than `after` when given. */
  listAttempts (subscriptionId: string, page: { readonly after?: bigint, readonly limit: number }): Promise<DeliveryAttemptRecordPage>
  /**
   * Leases up to `limit` due outbox rows of enabled subscriptions, each the oldest pending row of its
   * plant in its subscription (so one plant's events go out in commit order), at most the subscription's
   * allowance (`claimAllowance`) of each, taken across subscriptions in turns (`takeInTurns`), oldest due
   * first within a turn. With several instances each row is leased by one of them (PostgreSQL:
   * `FOR UPDATE SKIP LOCKED`).
   */
  claim (request: ClaimRequest): Promise<ClaimedDelivery[]>
  /** Records the attempts and their results in one transaction; an attempt whose lease was lost changes nothing. */
  settle (owner: string, attempts: readonly SettledAttempt[]): Promise<void>
  /** Deletes attempts recorded before `before`; returns how many. */
  pruneAttempts (before: number): Promise<number>
  /** Events waiting for delivery (not delivered, not failed), of every subscription: the metrics' backlog. */
  backlog (): Promise<WebhookBacklog>
  /** The stored secrets, to check at start that WEBHOOK_SECRETS_KEY opens them, and to re-seal them. */
  storedSecrets (): Promise<StoredSecrets[]>
  /**
   * Gives the subscription a new signing secret, its pending events kept; the one it replaces stays in
   * use next to it until `previousSecretUntil`, or is dropped at once when that is undefined. False when
   * there is no such subscription.
   */
  rotateSecret (id: string, storedSecret: string, previousSecretUntil: number | undefined): Promise<boolean>
  /** Replaces stored secrets in one transaction, each only if it still holds what was read; returns how many were replaced. */
  replaceStoredSecrets (replacements: readonly StoredSecretReplacement[]): Promise<number>
}

export interface WebhookBacklog {
  readonly pending: number
  /** When the oldest pending event was recorded (epoch ms); absent when none is pending. */
  readonly oldestRecordedAt?: number
}

/** The JSON body of an event: the plant's document, or its id alone for a deletion. */
export function deletedPlantBody (id: bigint | string): string {
  return `{"id":${id}}`
}

/** An event's id, sent as `webhook-id`: unique per event, the same on every retry and for every subscription. */
export function newEventId (): string {
  return `msg_${randomUUID().replaceAll('-', '')}`
}

/** Whether `events`, as stored (space-separated), includes `type`. */
export function subscribesTo (events: string, type: WebhookEventType): boolean {
  return ` ${events} `.includes(` ${type} `)
}

/** Integer columns as the SQL drivers return them: `bigint` (SQLite; PostgreSQL BIGINT) or `number`. */
type IntegerColumn = bigint | number

export interface SubscriptionRow {
  readonly id: string
  readonly url: string
  readonly events: string
  readonly created_at: IntegerColumn
  readonly disabled_at: IntegerColumn | null
  readonly disabled_reason: string | null
}

export const SUBSCRIPTION_COLUMNS = 'id, url, events, created_at, disabled_at, disabled_reason'

export function subscriptionOfRow (row: SubscriptionRow): WebhookSubscriptionRecord {
  return {
    id: row.id,
    url: row.url,
    events: row.events.split(' ') as WebhookEventType[],
    createdAt: Number(row.created_at),
    ...(row.disabled_at === null ? {} : { disabledAt: Number(row.disabled_at) }),
    ...(row.disabled_reason === null ? {} : { disabledReason: row.disabled_reason })
  }
}

export interface SubscriptionStatusRow extends SubscriptionRow {
  readonly delivered: IntegerColumn
  readonly failed: IntegerColumn
  readonly last_error: string | null
  readonly last_error_at: IntegerColumn | null
  readonly previous_secret_until: IntegerColumn | null
}

export const SUBSCRIPTION_STATUS_COLUMNS = `${SUBSCRIPTION_COLUMNS}, delivered, failed, last_error, last_error_at, previous_secret_until`

export function subscriptionStatusOfRow (row: SubscriptionStatusRow, pending: IntegerColumn): WebhookSubscriptionStatusRecord {
  return {
    ...subscriptionOfRow(row),
    pending: Number(pending),
    delivered: Number(row.delivered),
    failed: Number(row.failed),
    ...(row.last_error === null ? {} : { lastError: { at: Number(row.last_error_at), message: row.last_error } }),
    ...(row.previous_secret_until === null ? {} : { previousSecretUntil: Number(row.previous_secret_until) })
  }
}

export interface AttemptRow {
  readonly id: bigint
  readonly event_id: string
  readonly event_type: string
  readonly attempt: IntegerColumn
  readonly status_code: IntegerColumn | null
  readonly error: string | null
  readonly at: IntegerColumn
}

export const ATTEMPT_COLUMNS = 'id, event_id, event_type, attempt, status_code, error, at'

/** A page of attempts read with one row more than `limit`, to tell whether older ones follow. */
export function attemptPageOf (rows: readonly AttemptRow[], limit: number): DeliveryAttemptRecordPage {
  const attempts = rows.slice(0, limit).map((row): DeliveryAttemptRecord => ({
    id: BigInt(row.id),
    eventId: row.event_id,
    type: row.event_type as WebhookEventType,
    attempt: Number(row.attempt),
    ...(row.status_code === null ? {} : { statusCode: Number(row.status_code) }),
    ...(row.error === null ? {} : { error: row.error }),
    at: Number(row.at)
  }))
  const last = attempts.at(-1)
  return rows.length > limit && last !== undefined ? { attempts, nextAfter: last.id } : { attempts }
}

export interface OutboxRow {
  readonly id: bigint
  readonly subscription_id: string
  readonly event_id: string
  readonly event_type: string
  readonly plant_id: bigint
  readonly body: string
  readonly created_at: IntegerColumn
  readonly attempts: IntegerColumn
}

export const OUTBOX_COLUMNS = 'id, subscription_id, event_id, event_type, plant_id, body, created_at, attempts'

/** A subscription's columns a claim returns with each outbox row: where to post it and what to sign it with. */
export interface ClaimedSubscriptionRow {
  readonly url: string
  readonly secret: string
  readonly previous_secret: string | null
  readonly previous_secret_until: IntegerColumn | null
}

/** The subscription columns of ClaimedSubscriptionRow, in SQL. */
export const CLAIMED_SUBSCRIPTION_COLUMNS = 'url, secret, previous_secret, previous_secret_until'

/** The stored secrets of a subscription row. */
export function storedSecretsOfRow (row: { readonly id: string } & Omit<ClaimedSubscriptionRow, 'url'>): StoredSecrets {
  return {
    id: row.id,
    storedSecret: row.secret,
    ...(row.previous_secret === null ? {} : { storedPreviousSecret: row.previous_secret }),
    ...(row.previous_secret === null || row.previous_secret_until === null ? {} : { previousSecretUntil: Number(row.previous_secret_until) })
  }
}

/** Claimed outbox rows in outbox order, with their subscriptions' URLs and secrets. */
export function claimedDeliveries (
  rows: readonly OutboxRow[],
  subscriptions: ReadonlyMap<string, ClaimedSubscriptionRow>
): ClaimedDelivery[] {
  const claimed: ClaimedDelivery[] = []
  for (const row of [...rows].sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))) {
    const subscription = subscriptions.get(row.subscription_id)
    if (subscription === undefined) continue
    const { id: _subscriptionId, ...secrets } = storedSecretsOfRow({ id: row.subscription_id, ...subscription })
    claimed.push({
      id: BigInt(row.id),
      subscriptionId: row.subscription_id,
      url: subscription.url,
      ...secrets,
      eventId: row.event_id,
      type: row.event_type as WebhookEventType,
      plantId: BigInt(row.plant_id),
      body: row.body,
      createdAt: Number(row.created_at),
      attempts: Number(row.attempts)
    })
  }
  return claimed
}
