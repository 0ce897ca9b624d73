import { isLive, newestFirst, type AccessTokenStore, type VerifiableAccessToken } from './access-token-store.js'
import { outcomeOfMeeting, pageOf, plantJson, samePlant, type CreateOutcome, type PlantRecord, type PlantStore } from './plant-store.js'
import { decideChange, idOf, type ChangeOperation, type WriteResult } from './write-operations.js'
import {
  deletedPlantBody, newEventId, subscribesTo, type ClaimedDelivery, type DeliveryAttemptRecord, type NewWebhookSubscription,
  type SettledAttempt, type WebhookEventType, type WebhookStore, type WebhookSubscriptionStatus
} from './webhook-store.js'

/** Keeps plants in memory: for tests and throwaway runs (`DATABASE_URL=memory:`); nothing survives a restart. */
export function openMemoryStore (): PlantStore {
  const plants = new Map<bigint, PlantRecord>()
  const allIds = new SortedIds()
  /** The ids of the plants with each tag: the index a filtered page reads. */
  const idsByTag = new Map<string, SortedIds>()

  const webhooks = new MemoryWebhookStore()

  /**
   * Makes `plant` (undefined: none) the plant stored in place of `current`, keeping the indexes in step,
   * and records the change's event.
   */
  function replace (current: PlantRecord | undefined, plant: PlantRecord | undefined): void {
    if (current !== undefined && plant !== undefined && samePlant(current, plant)) return
    webhooks.recordChange(current, plant)
    const retagged = current?.tag !== plant?.tag || current === undefined || plant === undefined
    if (retagged && current?.tag !== undefined) {
      const tagged = idsByTag.get(current.tag) as SortedIds
      tagged.remove(current.id)
      if (tagged.size === 0) idsByTag.delete(current.tag)
    }
    if (plant === undefined) {
      if (current !== undefined) {
        plants.delete(current.id)
        allIds.remove(current.id)
      }
      return
    }
    plants.set(plant.id, plant)
    if (current === undefined) allIds.insert(plant.id)
    if (retagged && plant.tag !== undefined) {
      let tagged = idsByTag.get(plant.tag)
      if (tagged === undefined) idsByTag.set(plant.tag, tagged = new SortedIds())
      tagged.insert(plant.id)
    }
  }

  function change<Operation extends ChangeOperation> (operation: Operation): Promise<WriteResult<Operation>> {
    const current = plants.get(idOf(operation))
    const { outcome, after } = decideChange(operation, current)
    replace(current, after)
    return Promise.resolve(outcome as WriteResult<Operation>)
  }

  return {
    backend: 'memory',
    async create (plant): Promise<CreateOutcome> {
      const existing = plants.get(plant.id)
      if (existing !== undefined) return outcomeOfMeeting(existing, plant)
      replace(undefined, plant)
      return { status: 'created', plant }
    },
    async get (id) {
      const plant = plants.get(id)
      return plant === undefined ? undefined : plantJson(plant.id, plant.name, plant.tag)
    },
    async list ({ after, limit, tag }) {
      const ids = (tag === undefined ? allIds : idsByTag.get(tag) ?? new SortedIds()).page(after, limit + 1)
      const documents = ids.map((id) => {
        const plant = plants.get(id) as PlantRecord
        return plantJson(plant.id, plant.name, plant.tag)
      })
      return pageOf(documents, limit, (index) => ids[index] as bigint)
    },
    put (plant, expected) {
      return change({ kind: 'put', plant, expected })
    },
    patch (id, patch, expected) {
      return change({ kind: 'patch', id, patch, expected })
    },
    delete (id, expected) {
      return change({ kind: 'delete', id, expected })
    },
    tokens: memoryTokenStore(),
    webhooks,
    async ping () {},
    // Writes apply at once, one by one: there are no batches to report.
    observe () {},
    async close () {}
  }
}

/** Ids in ascending order, for keyset pages. */
class SortedIds {
  private readonly ids: bigint[] = []

  get size (): number {
    return this.ids.length
  }

  insert (id: bigint): void {
    const last = this.ids.at(-1)
    if (last === undefined || id > last) this.ids.push(id)
    else this.ids.splice(this.positionAfter(id), 0, id)
  }

  remove (id: bigint): void {
    this.ids.splice(this.positionAfter(id, true), 1)
  }

  /** Up to `count` ids greater than `after` (all from the smallest when it is undefined). */
  page (after: bigint | undefined, count: number): bigint[] {
    const start = after === undefined ? 0 : this.positionAfter(after)
    return this.ids.slice(start, start + count)
  }

  /** The index of the first id greater than `id` (or of `id` itself, when `inclusive`). */
  private positionAfter (id: bigint, inclusive = false): number {
    let low = 0
    let high = this.ids.length
    while (low < high) {
      const middle = (low + high) >>> 1
      const candidate = this.ids[middle] as bigint
      if (candidate < id || (!inclusive && candidate === id)) low = middle + 1
      else high = middle
    }
    return low
  }
}

function memoryTokenStore (): AccessTokenStore {
  const tokens = new Map<string, VerifiableAccessToken>()
  let revision = 0
  const withoutDigest = ({ digest: _digest, ...record }: VerifiableAccessToken) => record
  return {
    async list () {
      return [...tokens.values()].reverse().map(withoutDigest).sort(newestFirst)
    },
    async listVerifiable () {
      return [...tokens.values()].filter((token) => token.revokedAt === undefined)
    },
    async revision () {
      return String(revision)
    },
    async create (token) {
      for (const stored of tokens.values()) {
        if (stored.name === token.name && isLive(stored, token.createdAt)) return 'name-taken'
      }
      tokens.set(token.id, token)
      revision++
      return 'created'
    },
    async revoke (id, at) {
      const stored = tokens.get(id)
      if (stored === undefined) return undefined
      if (stored.revokedAt === undefined) {
        tokens.set(id, { ...stored, revokedAt: at })
        revision++
      }
      return withoutDigest(tokens.get(id) as VerifiableAccessToken)
    },
    async createInitialAdmin (token) {
      if (tokens.size > 0) return false
      tokens.set(token.id, token)
      revision++
      return true
    }
  }
}

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
  subscription: NewWebhookSubscription
  delivered: number
  failed: number
  lastError: { readonly at: number, readonly message: string } | undefined
}

/** The outbox in memory, with the same rules as the SQL adapters' (webhook-store.ts). */
class MemoryWebhookStore implements WebhookStore {
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

  async createSubscription (subscription: NewWebhookSubscription): Promise<void> {
    this.subscriptions.set(subscription.id, { subscription, delivered: 0, failed: 0, lastError: undefined })
  }

  async listSubscriptions () {
    return [...this.subscriptions.values()].reverse()
      .map(({ subscription: { storedSecret: _secret, ...record } }) => record)
      .sort((a, b) => b.createdAt - a.createdAt)
  }

  async getSubscription (id: string): Promise<WebhookSubscriptionStatus | undefined> {
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
      ...(entry.lastError === undefined ? {} : { lastError: entry.lastError })
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

  async claim ({ owner, now, leaseMs, limit }: { owner: string, now: number, leaseMs: number, limit: number }): Promise<ClaimedDelivery[]> {
    const claimed: ClaimedDelivery[] = []
    const plantsWithEarlierEvents = new Set<string>()
    for (const row of this.outbox.values()) {
      if (claimed.length === limit) break
      if (row.failedAt !== undefined) continue
      const plantKey = `${row.subscriptionId} ${row.plantId}`
      if (plantsWithEarlierEvents.has(plantKey)) continue
      plantsWithEarlierEvents.add(plantKey)
      const subscription = this.subscriptions.get(row.subscriptionId)?.subscription
      if (subscription === undefined || subscription.disabledAt !== undefined) continue
      if (row.nextAttemptAt > now || row.leaseUntil > now) continue
      row.leaseUntil = now + leaseMs
      row.leaseOwner = owner
      claimed.push({
        id: row.id,
        subscriptionId: row.subscriptionId,
        url: subscription.url,
        storedSecret: subscription.storedSecret,
        eventId: row.eventId,
        type: row.type,
        plantId: row.plantId,
        body: row.body,
        createdAt: row.createdAt,
        attempts: row.attempts
      })
    }
    return claimed
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

  async storedSecrets () {
    return [...this.subscriptions.values()].map(({ subscription }) => ({ id: subscription.id, storedSecret: subscription.storedSecret }))
  }
}
