import {
  claimAllowance, deletedPlantBody, newEventId, subscribesTo, takeInTurns, type ClaimedDelivery, type ClaimRequest, type DeliveryAttemptRecord,
  type NewWebhookSubscriptionRecord, type SettledAttempt, type StoredSecretReplacement, type StoredSecrets, type WebhookEventType,
  type WebhookStore, type WebhookSubscriptionStatusRecord
} from '../webhook-store.js'
import { plantJson } from '../plant-document.js'
import type { PlantRecord } from '../plant-store.js'

interface OutboxEntry {
  readonly id: bigint
  readonly subscriptionId: string
  readonly eventId: string
  readonly type: WebhookEventType
  readonly plantId: bigint
  readonly body: string
  readonly createdAt: number
  attempts: number
  nextAttemptAt: number
  leaseUntil: number
  leaseOwner: string | undefined
  failedAt: number | undefined
}

interface SubscriptionEntry {
  subscription: NewWebhookSubscriptionRecord
  delivered: number
  failed: number
  lastError: { readonly at: number, readonly message: string } | undefined
  /** The secret a rotation replaced and when it stops being used. */
  previous: { readonly storedSecret: string, readonly until: number } | undefined
}

/** The outbox in memory, with the same rules as the SQL adapters' (webhook-store.ts). */
export class MemoryWebhookStore implements WebhookStore {
  private readonly subscriptions = new Map<string, SubscriptionEntry>()
  /** In id order, which is commit order. */
  private readonly outbox = new Map<bigint, OutboxEntry>()
  private readonly attempts: Array<DeliveryAttemptRecord & { readonly subscriptionId: string }> = []
  private lastOutboxId = 0n
  private lastAttemptId = 0n

  recordChange (before: PlantRecord | undefined, after: PlantRecord | undefined): void {
    if (this.subscriptions.size === 0) return
    if (after !== undefined) this.record(before === undefined ? 'plant.created' : 'plant.updated', after.id, plantJson(after.id, after.name, after.tag))
    else if (before !== undefined) this.record('plant.deleted', before.id, deletedPlantBody(before.id))
  }

  private record (type: WebhookEventType, plantId: bigint, body: string): void {
    const eventId = newEventId()
    const now = Date.now()
    for (const { subscription } of this.subscriptions.values()) {
      if (subscription.disabledAt !== undefined || !subscribesTo(subscription.events.join(' '), type)) continue
      const id = ++this.lastOutboxId
      this.outbox.set(id, {
        id,
        subscriptionId: subscription.id,
        eventId,
        type,
        plantId,
        body,
        createdAt: now,
        attempts: 0,
        nextAttemptAt: now,
        leaseUntil: 0,
        leaseOwner: undefined,
        failedAt: undefined
      })
    }
  }

  async createSubscription (subscription: NewWebhookSubscriptionRecord): Promise<void> {
    this.subscriptions.set(subscription.id, { subscription, delivered: 0, failed: 0, lastError: undefined, previous: undefined })
  }

  async listSubscriptions () {
    return [...this.subscriptions.values()].reverse()
      .map(({ subscription: { storedSecret: _secret, ...record } }) => record)
      .sort((a, b) => b.createdAt - a.createdAt)
  }

  async getSubscription (id: string): Promise<WebhookSubscriptionStatusRecord | undefined> {
    const entry = this.subscriptions.get(id)
    if (entry === undefined) return undefined
    const { storedSecret: _secret, ...record } = entry.subscription
    let pending = 0
    for (const row of this.outbox.values()) if (row.subscriptionId === id && row.failedAt === undefined) pending++
    return {
      ...record,
      pending,
      delivered: entry.delivered,
      failed: entry.failed,
      ...(entry.lastError === undefined ? {} : { lastError: entry.lastError }),
      ...(entry.previous === undefined ? {} : { previousSecretUntil: entry.previous.until })
    }
  }

  async deleteSubscription (id: string): Promise<boolean> {
    for (const row of this.outbox.values()) if (row.subscriptionId === id) this.outbox.delete(row.id)
    for (let index = this.attempts.length - 1; index >= 0; index--) if (this.attempts[index]?.subscriptionId === id) this.attempts.splice(index, 1)
    return this.subscriptions.delete(id)
  }

  async listAttempts (subscriptionId: string, { after, limit }: { readonly after?: bigint, readonly limit: number }) {
    const older = this.attempts
      .filter((attempt) => attempt.subscriptionId === subscriptionId && (after === undefined || attempt.id < after))
      .reverse()
      .map(({ subscriptionId: _subscription, ...attempt }) => attempt)
    const attempts = older.slice(0, limit)
    const last = attempts.at(-1)
    return older.length > limit && last !== undefined ? { attempts, nextAfter: last.id } : { attempts }
  }

  async claim (request: ClaimRequest): Promise<ClaimedDelivery[]> {
    const { owner, now, leaseMs, limit } = request
    for (const attempt of request.settled ?? []) this.settleOne(owner, attempt)
    const candidates = new Map<string, OutboxEntry[]>()
    const plantsWithEarlierEvents = new Set<string>()
    for (const row of this.outbox.values()) {
      if (row.failedAt !== undefined) continue
      const plantKey = `${row.subscriptionId} ${row.plantId}`
      if (plantsWithEarlierEvents.has(plantKey)) continue
      plantsWithEarlierEvents.add(plantKey)
      const entry = this.subscriptions.get(row.subscriptionId)
      const subscription = entry?.subscription
      if (entry === undefined || subscription === undefined || subscription.disabledAt !== undefined) continue
      if (row.nextAttemptAt > now || row.leaseUntil > now) continue
      const rows = candidates.get(row.subscriptionId)
      if (rows === undefined) candidates.set(row.subscriptionId, [row])
      else rows.push(row)
    }
    const oldestDueFirst = [...candidates].map(([subscriptionId, rows]) => rows
      .sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || (a.id < b.id ? -1 : 1))
      .slice(0, claimAllowance(request, subscriptionId)))
    return takeInTurns(oldestDueFirst, limit).sort((a, b) => (a.id < b.id ? -1 : 1)).map((row) => {
      const { subscription, previous } = this.subscriptions.get(row.subscriptionId) as SubscriptionEntry
      row.leaseUntil = now + leaseMs
      row.leaseOwner = owner
      return {
        id: row.id,
        subscriptionId: row.subscriptionId,
        url: subscription.url,
        storedSecret: subscription.storedSecret,
        ...(previous === undefined ? {} : { storedPreviousSecret: previous.storedSecret, previousSecretUntil: previous.until }),
        eventId: row.eventId,
        type: row.type,
        plantId: row.plantId,
        body: row.body,
        createdAt: row.createdAt,
        attempts: row.attempts
      }
    })
  }

  async settle (owner: string, attempts: readonly SettledAttempt[]): Promise<void> {
    for (const attempt of attempts) this.settleOne(owner, attempt)
  }

  private settleOne (owner: string, { delivery, at, statusCode, error, result, nextAttemptAt }: SettledAttempt): void {
    const entry = this.subscriptions.get(delivery.subscriptionId)
    if (entry === undefined) return
    this.attempts.push({
      id: ++this.lastAttemptId,
      subscriptionId: delivery.subscriptionId,
      eventId: delivery.eventId,
      type: delivery.type,
      attempt: delivery.attempts + 1,
      ...(statusCode === undefined ? {} : { statusCode }),
      ...(error === undefined ? {} : { error }),
      at
    })
    const row = this.outbox.get(delivery.id)
    if (row === undefined || row.leaseOwner !== owner) return
    row.attempts++
    row.leaseUntil = 0
    row.leaseOwner = undefined
    if (result === 'delivered') {
      this.outbox.delete(row.id)
      entry.delivered++
      return
    }
    entry.lastError = { at, message: error ?? `HTTP ${statusCode}` }
    if (result === 'retry') {
      row.nextAttemptAt = nextAttemptAt ?? at
      return
    }
    row.failedAt = at
    entry.failed++
    if (result === 'gone' && entry.subscription.disabledAt === undefined) {
      entry.subscription = { ...entry.subscription, disabledAt: at, disabledReason: 'the receiver answered 410 Gone' }
      for (const pending of this.outbox.values()) {
        if (pending.subscriptionId === delivery.subscriptionId && pending.failedAt === undefined) {
          pending.failedAt = at
          entry.failed++
        }
      }
    }
  }

  async pruneAttempts (before: number): Promise<number> {
    const kept = this.attempts.filter((attempt) => attempt.at >= before)
    const pruned = this.attempts.length - kept.length
    this.attempts.splice(0, this.attempts.length, ...kept)
    return pruned
  }

  async backlog () {
    let pending = 0
    let oldestRecordedAt: number | undefined
    for (const row of this.outbox.values()) {
      if (row.failedAt !== undefined) continue
      pending++
      oldestRecordedAt = Math.min(oldestRecordedAt ?? Infinity, row.createdAt)
    }
    return oldestRecordedAt === undefined ? { pending } : { pending, oldestRecordedAt }
  }

  async storedSecrets (): Promise<StoredSecrets[]> {
    return [...this.subscriptions.values()].map(({ subscription, previous }) => ({
      id: subscription.id,
      storedSecret: subscription.storedSecret,
      ...(previous === undefined ? {} : { storedPreviousSecret: previous.storedSecret, previousSecretUntil: previous.until })
    }))
  }

  async rotateSecret (id: string, storedSecret: string, previousSecretUntil: number | undefined): Promise<boolean> {
    const entry = this.subscriptions.get(id)
    if (entry === undefined) return false
    entry.previous = previousSecretUntil === undefined ? undefined : { storedSecret: entry.subscription.storedSecret, until: previousSecretUntil }
    entry.subscription = { ...entry.subscription, storedSecret }
    return true
  }

  async replaceStoredSecrets (replacements: readonly StoredSecretReplacement[]): Promise<number> {
    let replaced = 0
    for (const { id, column, from, to } of replacements) {
      const entry = this.subscriptions.get(id)
      if (entry === undefined) continue
      if (column === 'secret' && to !== null && entry.subscription.storedSecret === from) {
        entry.subscription = { ...entry.subscription, storedSecret: to }
        replaced++
      } else if (column === 'previousSecret' && entry.previous?.storedSecret === from) {
        entry.previous = to === null ? undefined : { ...entry.previous, storedSecret: to }
        replaced++
      }
    }
    return replaced
  }
}
