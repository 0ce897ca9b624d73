import { randomUUID } from 'node:crypto'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { WEBHOOK_EVENT_TYPES } from '../../src/store/webhook-store.js'
import { newSigningSecret } from '../../src/webhooks/secrets.js'
import { bearer, buildTestApp, postPlant, TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { ADMIN_TOKEN, subscribe, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'

const PLANTS = 1500

interface ExpectedEvent { readonly type: string, readonly body: string }

/** Counts the outbox rows an instance's dispatcher claims, calling through to the store. */
function countClaimedRows (store: PlantStore): { claimed: number } {
  const counter = { claimed: 0 }
  const claim = store.webhooks.claim.bind(store.webhooks)
  store.webhooks.claim = async (request) => {
    const rows = await claim(request)
    counter.claimed += rows.length
    return rows
  }
  return counter
}

async function openInstance (databaseUrl: string): Promise<{ app: FastifyInstance, claims: { claimed: number } }> {
  const store = await openPostgresStore(databaseUrl, TEST_POSTGRES_OPTIONS)
  const claims = countClaimedRows(store)
  const app = await buildTestApp({ store, tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
  return { app, claims }
}

/**
 * Writes plant `index`: created on one instance, one plant in four renamed on the next, one in ten deleted on the
 * third, each write answered as docs/reference/api/ says. Returns the events the writes must cause, in commit order.
 */
async function writePlant (apps: readonly FastifyInstance[], index: number): Promise<ExpectedEvent[]> {
  const id = 7000 + index
  const instance = (offset: number) => apps[(index + offset) % apps.length] as FastifyInstance
  const [creator, renamer, deleter] = [instance(0), instance(1), instance(2)]
  const events: ExpectedEvent[] = []
  const created = `{"id":${id},"name":"plant ${index}","tag":"batch ${index % 7}"}`
  const post = await postPlant(creator, created)
  expect({ status: post.statusCode, body: post.json() }).toEqual({ status: 200, body: { name: `plant ${index}`, tag: `batch ${index % 7}` } })
  events.push({ type: 'plant.created', body: created })
  if (index % 4 === 0) {
    const put = await renamer.inject({
      method: 'PUT', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/json' }, payload: `{"name":"renamed ${index}"}`
    })
    expect(put.statusCode, put.body).toBe(200)
    events.push({ type: 'plant.updated', body: `{"id":${id},"name":"renamed ${index}"}` })
  }
  if (index % 10 === 1) {
    const deleted = await deleter.inject({ method: 'DELETE', url: `/plants/${id}`, headers: bearer() })
    expect(deleted.statusCode, deleted.body).toBe(204)
    events.push({ type: 'plant.deleted', body: `{"id":${id}}` })
  }
  return events
}

interface AttemptDocument { readonly id: string, readonly eventId: string, readonly type: string, readonly attempt: number, readonly statusCode?: number, readonly error?: string }

/** Every attempt of the subscription, following the `Link` pages of GET /admin/webhooks/{id}/deliveries. */
async function allAttempts (app: FastifyInstance, subscriptionId: string): Promise<AttemptDocument[]> {
  const attempts: AttemptDocument[] = []
  let url: string | undefined = `/admin/webhooks/${subscriptionId}/deliveries?limit=1000`
  while (url !== undefined) {
    const response: LightMyRequestResponse = await app.inject({ method: 'GET', url, headers: bearer(ADMIN_TOKEN) })
    expect(response.statusCode, response.body).toBe(200)
    attempts.push(...response.json<AttemptDocument[]>())
    url = /^<([^>]+)>; rel="next"$/.exec(String(response.headers.link ?? ''))?.[1]
  }
  return attempts
}

async function waitForSettled (app: FastifyInstance, subscriptionId: string, delivered: number): Promise<void> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const response = await app.inject({ method: 'GET', url: `/admin/webhooks/${subscriptionId}`, headers: bearer(ADMIN_TOKEN) })
    const status = response.json<{ pending: number, delivered: number, failed: number }>()
    if (status.pending === 0 && status.delivered === delivered) return
    if (Date.now() > deadline) throw new Error(`the subscription still reads ${response.body}, not ${delivered} delivered and none pending`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('webhooks with three instances on one PostgreSQL database', () => {
  it('deliver every event of writes spread over all of them exactly once, in commit order per plant, each instance taking a share', { timeout: 60_000 }, async () => {
    const databaseUrl = await createTestDatabase()
    const instances = [await openInstance(databaseUrl), await openInstance(databaseUrl), await openInstance(databaseUrl)]
    const apps = instances.map((instance) => instance.app)
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(apps[0] as FastifyInstance, receiver)

    const expectedPerPlant = await Promise.all(Array.from({ length: PLANTS }, (_, index) => writePlant(apps, index)))
    const expectedCount = expectedPerPlant.flat().length

    await receiver.waitForDeliveries(expectedCount, 40_000)
    await waitForSettled(apps[1] as FastifyInstance, subscriptionId, expectedCount)

    const deliveries = receiver.deliveries
    expect(deliveries).toHaveLength(expectedCount)
    expect(new Set(deliveries.map((delivery) => delivery.id)).size).toBe(expectedCount)
    expect(deliveries.filter((delivery) => !delivery.verified)).toEqual([])
    const receivedPerPlant = new Map<number, ExpectedEvent[]>()
    for (const { type, body } of deliveries) {
      const id = (JSON.parse(body) as { id: number }).id
      receivedPerPlant.set(id, [...(receivedPerPlant.get(id) ?? []), { type, body }])
    }
    expect(new Map([...receivedPerPlant].sort(([a], [b]) => a - b)))
      .toEqual(new Map(expectedPerPlant.map((events, index) => [7000 + index, events])))

    const attempts = await allAttempts(apps[2] as FastifyInstance, subscriptionId)
    expect(attempts).toHaveLength(expectedCount)
    expect(attempts.filter((attempt) => attempt.attempt !== 1 || attempt.statusCode !== 204 || attempt.error !== undefined)).toEqual([])
    expect(new Set(attempts.map((attempt) => attempt.eventId))).toEqual(new Set(deliveries.map((delivery) => delivery.id)))

    const claimed = instances.map((instance) => instance.claims.claimed)
    expect(claimed.reduce((sum, count) => sum + count, 0)).toBe(expectedCount)
    for (const count of claimed) expect(count).toBeGreaterThan(0)
  })

  it('leave the events one instance leased to it until its lease runs out, delivering the others meanwhile', async () => {
    const databaseUrl = await createTestDatabase()
    const storeA = await openPostgresStore(databaseUrl, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => storeA.close())
    const receiver = await WebhookReceiver.start()
    const secret = newSigningSecret()
    await storeA.webhooks.createSubscription({
      id: randomUUID(), url: receiver.url, events: [...WEBHOOK_EVENT_TYPES], createdAt: Date.now(), storedSecret: secret
    })
    receiver.useSecret(secret)
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, index) => storeA.create({ id: BigInt(8000 + index), name: `leased ${index}` })))
    expect(outcomes.map((outcome) => outcome.status)).toEqual(Array(40).fill('created'))

    const leaseMs = 4000
    const leasedAt = Date.now()
    const leased = await storeA.webhooks.claim({ owner: 'a', now: leasedAt, leaseMs, limit: 10 })
    expect(leased).toHaveLength(10)
    const leaseEnds = leasedAt + leaseMs
    const leasedIds = new Set(leased.map((delivery) => delivery.eventId))

    await buildTestApp({
      store: await openPostgresStore(databaseUrl, TEST_POSTGRES_OPTIONS), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG }
    })
    const others = (await receiver.waitForDeliveries(30, leaseEnds - 500 - Date.now())).slice()
    expect(others.map((delivery) => delivery.id).filter((id) => leasedIds.has(id))).toEqual([])
    expect(others.every((delivery) => delivery.receivedAt < leaseEnds)).toBe(true)

    const deliveries = await receiver.waitForDeliveries(40, leaseEnds + 5000 - Date.now())
    const afterLease = deliveries.slice(30)
    expect(new Set(afterLease.map((delivery) => delivery.id))).toEqual(leasedIds)
    for (const delivery of afterLease) expect(delivery.receivedAt).toBeGreaterThanOrEqual(leaseEnds)
    expect(new Set(deliveries.map((delivery) => delivery.id)).size).toBe(40)
    expect(deliveries.filter((delivery) => !delivery.verified)).toEqual([])
  })
})
