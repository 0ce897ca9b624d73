import { randomUUID } from 'node:crypto'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PlantStore } from '../../src/store/plant-store.js'
import { WEBHOOK_EVENT_TYPES, type ClaimedDelivery } from '../../src/store/webhook-store.js'
import { newSigningSecret } from '../../src/webhooks/secrets.js'
import { backends } from '../helpers/app.js'

async function addSubscription (store: PlantStore): Promise<string> {
  const id = randomUUID()
  await store.webhooks.createSubscription({
    id, url: `http://127.0.0.1:9/${id}`, events: [...WEBHOOK_EVENT_TYPES], createdAt: Date.now(), storedSecret: newSigningSecret()
  })
  return id
}

async function createPlants (store: PlantStore, first: number, count: number): Promise<void> {
  for (let index = first; index < first + count; index++) {
    expect((await store.create({ id: BigInt(index), name: `plant ${index}` })).status).toBe('created')
  }
}

/** The plant ids claimed per subscription, in id order. */
function plantsBySubscription (claimed: readonly ClaimedDelivery[], subscriptions: Record<string, string>): Record<string, number[]> {
  const named = Object.fromEntries(Object.entries(subscriptions).map(([name, id]) => [id, name]))
  const plants: Record<string, number[]> = Object.fromEntries(Object.keys(subscriptions).map((name) => [name, []]))
  for (const delivery of claimed) plants[named[delivery.subscriptionId] as string]?.push(Number(delivery.plantId))
  for (const ids of Object.values(plants)) ids.sort((a, b) => a - b)
  return plants
}

/**
 * A store with two subscriptions: `busy`, with a backlog of 30 events (plants 1–30) older than the 3
 * that both get (plants 31–33), and `quiet`, with only those 3.
 */
async function storeWithBacklog (open: () => Promise<PlantStore>) {
  const store = await open()
  onTestFinished(() => store.close())
  const busy = await addSubscription(store)
  await createPlants(store, 1, 30)
  const quiet = await addSubscription(store)
  await createPlants(store, 31, 3)
  return { store, subscriptions: { busy, quiet } }
}

describe.each(backends)('fair claims across subscriptions ($name)', (backend) => {
  it('takes every subscription\'s oldest due events in turns, so a long backlog of one does not crowd out another', async () => {
    const { store, subscriptions } = await storeWithBacklog(() => backend.open())
    const now = Date.now() + 1000

    const claimed = await store.webhooks.claim({ owner: 'a', now, leaseMs: 30_000, limit: 8 })

    expect(plantsBySubscription(claimed, subscriptions)).toEqual({ busy: [1, 2, 3, 4, 5], quiet: [31, 32, 33] })
  })

  it('takes at most the per-subscription share of one subscription, and its lower limit where one is given', async () => {
    const { store, subscriptions } = await storeWithBacklog(() => backend.open())
    const now = Date.now() + 1000
    const claim = (owner: string, request: { perSubscription: number, subscriptionLimits?: ReadonlyMap<string, number> }) =>
      store.webhooks.claim({ owner, now, leaseMs: 30_000, limit: 16, ...request })

    const first = await claim('a', { perSubscription: 4 })
    const paused = await claim('b', { perSubscription: 4, subscriptionLimits: new Map([[subscriptions.busy, 0]]) })
    const probe = await claim('c', { perSubscription: 4, subscriptionLimits: new Map([[subscriptions.busy, 1]]) })

    expect(plantsBySubscription(first, subscriptions)).toEqual({ busy: [1, 2, 3, 4], quiet: [31, 32, 33] })
    expect(paused).toEqual([])
    expect(plantsBySubscription(probe, subscriptions)).toEqual({ busy: [5], quiet: [] })
  })

  it('still takes only the oldest pending event of a plant in each subscription', async () => {
    const store = await backend.open()
    onTestFinished(() => store.close())
    const subscription = await addSubscription(store)
    await createPlants(store, 1, 2)
    expect((await store.put({ id: 1n, name: 'renamed' })).status).toBe('replaced')

    const claimed = await store.webhooks.claim({ owner: 'a', now: Date.now() + 1000, leaseMs: 30_000, limit: 16, perSubscription: 4 })

    expect(claimed.map((delivery) => ({ plant: Number(delivery.plantId), type: delivery.type, subscription: delivery.subscriptionId })))
      .toEqual([{ plant: 1, type: 'plant.created', subscription }, { plant: 2, type: 'plant.created', subscription }])
  })

  it('records the outcomes a claim carries before it claims: a delivered event is done, and its plant\'s next event is claimed at once', async () => {
    const store = await backend.open()
    onTestFinished(() => store.close())
    const subscription = await addSubscription(store)
    await createPlants(store, 1, 1)
    expect((await store.put({ id: 1n, name: 'renamed' })).status).toBe('replaced')
    const now = Date.now() + 1000
    const [created] = await store.webhooks.claim({ owner: 'a', now, leaseMs: 30_000, limit: 16 })
    if (created === undefined) throw new Error('nothing claimed')

    const claimed = await store.webhooks.claim({
      owner: 'a', now, leaseMs: 30_000, limit: 16, settled: [{ delivery: created, at: now, statusCode: 204, result: 'delivered' }]
    })

    expect(claimed.map((delivery) => ({ plant: Number(delivery.plantId), type: delivery.type }))).toEqual([{ plant: 1, type: 'plant.updated' }])
    expect(await store.webhooks.getSubscription(subscription)).toMatchObject({ pending: 1, delivered: 1, failed: 0 })
    expect((await store.webhooks.listAttempts(subscription, { limit: 10 })).attempts.map(({ eventId, statusCode, attempt }) => ({ eventId, statusCode, attempt })))
      .toEqual([{ eventId: created.eventId, statusCode: 204, attempt: 1 }])
  })

  it('leaves an event whose lease went to another instance to that one: a delivered outcome from the first neither removes nor counts it', async () => {
    const store = await backend.open()
    onTestFinished(() => store.close())
    const subscription = await addSubscription(store)
    await createPlants(store, 1, 1)
    const now = Date.now() + 1000
    const [first] = await store.webhooks.claim({ owner: 'a', now, leaseMs: 1000, limit: 16 })
    if (first === undefined) throw new Error('nothing claimed')
    const [second] = await store.webhooks.claim({ owner: 'b', now: now + 2000, leaseMs: 30_000, limit: 16 })
    expect(second?.eventId).toBe(first.eventId)

    await store.webhooks.settle('a', [{ delivery: first, at: now + 2001, statusCode: 204, result: 'delivered' }])
    const afterFirst = await store.webhooks.getSubscription(subscription)
    await store.webhooks.settle('b', [{ delivery: second as ClaimedDelivery, at: now + 2002, statusCode: 204, result: 'delivered' }])

    expect(afterFirst).toMatchObject({ pending: 1, delivered: 0 })
    expect(await store.webhooks.getSubscription(subscription)).toMatchObject({ pending: 0, delivered: 1 })
  })
})
