import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { openMemoryStore } from '../../src/store/memory/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import Database from '../../src/store/sqlite/driver.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { ClaimAfterSettleError, WEBHOOK_EVENT_TYPES } from '../../src/store/webhook-store.js'
import { CIRCUIT_THRESHOLD } from '../../src/webhooks/circuit-breaker.js'
import { WebhookDispatcher, type DispatcherOptions } from '../../src/webhooks/dispatcher.js'
import { newSigningSecret, SecretBox } from '../../src/webhooks/secrets.js'
import { TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'

const OPTIONS: DispatcherOptions = {
  concurrency: 32,
  concurrencyPerSubscription: 16,
  firstRetryMs: 60_000,
  maxRetryMs: 60_000,
  retryForMs: 3600_000,
  leaseMs: 30_000,
  pollMs: 50,
  allowPrivateNetworks: true
}

/** A dispatcher of `store` whose warnings are kept in `warnings` (and handed to `onWarn`); stopped when the test ends. */
function dispatcherOf (store: PlantStore, options: Partial<DispatcherOptions>, onWarn: (message: string) => void = () => {}) {
  const warnings: string[] = []
  const log = {
    warn: (_details: object, message: string) => { warnings.push(message); onWarn(message) },
    debug: () => {}
  }
  const dispatcher = new WebhookDispatcher(store.webhooks, new SecretBox(undefined), { ...OPTIONS, ...options }, log, 'plantstore-test')
  onTestFinished(() => dispatcher.stop())
  return { dispatcher, warnings }
}

async function subscribe (store: PlantStore, receiver: WebhookReceiver): Promise<string> {
  const id = randomUUID()
  const secret = newSigningSecret()
  await store.webhooks.createSubscription({ id, url: receiver.url, events: [...WEBHOOK_EVENT_TYPES], createdAt: Date.now(), storedSecret: secret })
  receiver.useSecret(secret)
  return id
}

async function createPlants (store: PlantStore, first: number, count: number): Promise<void> {
  for (let index = first; index < first + count; index++) {
    expect((await store.create({ id: BigInt(index), name: `plant ${index}` })).status).toBe('created')
  }
}

async function until (condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms`)
    await sleep(10)
  }
}

describe('the dispatcher\'s claims', () => {
  it('with one slot, keeps claiming after a failing receiver\'s circuit opens: a healthy receiver\'s event goes out within 2 s', async () => {
    const store = openMemoryStore()
    onTestFinished(() => store.close())
    const failing = await WebhookReceiver.start()
    failing.answerWith(() => ({ status: 500, delayMs: 100 }))
    const healthy = await WebhookReceiver.start()
    await subscribe(store, failing)
    await createPlants(store, 1, CIRCUIT_THRESHOLD)
    const { dispatcher } = dispatcherOf(store, { concurrency: 1, concurrencyPerSubscription: 1 })

    dispatcher.start()
    await failing.waitForDeliveries(CIRCUIT_THRESHOLD, 5000)
    await until(() => dispatcher.circuits.open === 1, 2000)
    await subscribe(store, healthy)
    await createPlants(store, CIRCUIT_THRESHOLD + 1, 1)
    const [delivery] = await healthy.waitForDeliveries(1, 2000)

    expect({ type: delivery?.type, verified: delivery?.verified }).toEqual({ type: 'plant.created', verified: true })
    expect(failing.deliveries).toHaveLength(CIRCUIT_THRESHOLD)
  })

  it('records at stop() the outcomes a failed claim carried (SQLite write lock held past busy_timeout)', async () => {
    const file = join(temporaryFolder(), 'plants.db')
    const store = openSqliteStore(file, { busyTimeoutMs: 300 })
    onTestFinished(() => store.close())
    const other = new Database(file)
    onTestFinished(() => { if (other.inTransaction) other.exec('ROLLBACK'); other.close() })
    const receiver = await WebhookReceiver.start()
    receiver.answerWith(() => ({ status: 204, delayMs: 100 }))
    const subscription = await subscribe(store, receiver)
    await createPlants(store, 1, 1)
    let stopped: Promise<void> | undefined
    // The claim that carries the delivered outcome fails on the lock; then the dispatcher is stopped and
    // the lock let go while stop()'s settle waits for it.
    const { dispatcher, warnings } = dispatcherOf(store, { pollMs: 60_000 }, (message) => {
      if (!message.startsWith('webhooks: cannot record delivery outcomes with a claim') || stopped !== undefined) return
      stopped = dispatcher.stop()
      // stop()'s settle is posted to the writer after this returns, so it finds the lock gone.
      other.exec('ROLLBACK')
    })

    dispatcher.start()
    await receiver.waitForDeliveries(1, 2000)
    other.exec('BEGIN IMMEDIATE')
    await until(() => stopped !== undefined, 3000)
    await stopped

    expect(warnings).toEqual([
      'webhooks: cannot record delivery outcomes with a claim; recording them again',
      'webhooks: cannot read the outbox; trying again every poll'
    ])
    expect(await store.webhooks.getSubscription(subscription)).toMatchObject({ pending: 0, delivered: 1, failed: 0 })
    expect((await store.webhooks.listAttempts(subscription, { limit: 10 })).attempts.map(({ statusCode, attempt }) => ({ statusCode, attempt })))
      .toEqual([{ statusCode: 204, attempt: 1 }])
  })

  it('does not record again the outcomes a claim recorded before its own statement failed (PostgreSQL, a trigger refusing the lease)', async () => {
    const url = await createTestDatabase()
    const postgres = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => postgres.close())
    const claimErrors: unknown[] = []
    const claim: typeof postgres.webhooks.claim = async (request) => await postgres.webhooks.claim(request).catch((error: unknown) => {
      claimErrors.push(error)
      throw error
    })
    const store: PlantStore = { ...postgres, webhooks: { ...postgres.webhooks, claim } }
    const database = new pg.Client({ connectionString: url })
    await database.connect()
    onTestFinished(() => database.end())
    let answerFirst = () => {}
    const firstAnswered = new Promise<void>((resolve) => { answerFirst = resolve })
    const receiver = await WebhookReceiver.start()
    receiver.answerWith(() => (receiver.deliveries.length === 1 ? { status: 204, after: firstAnswered } : { status: 204 }))
    const subscription = await subscribe(store, receiver)
    await createPlants(store, 1, 1)
    // No polls: the claims are the start's, the one an attempt's end makes, and wake()'s.
    const { dispatcher, warnings } = dispatcherOf(store, { pollMs: 60_000 })

    dispatcher.start()
    await until(() => receiver.deliveries.length === 1, 2000)
    // From now on leasing an outbox row fails. The plant's update waits for its created event, so the
    // claim that the created event's end makes, carrying its outcome, is the first to lease a row: it
    // commits the outcome in its own transaction, then fails.
    await database.query(`CREATE FUNCTION refuse_lease () RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'lease refused by the test'; END $$`)
    await database.query('CREATE TRIGGER refuse_lease BEFORE UPDATE ON webhook_outbox FOR EACH ROW EXECUTE FUNCTION refuse_lease()')
    expect((await store.put({ id: 1n, name: 'renamed' })).status).toBe('replaced')
    answerFirst()
    await until(() => claimErrors.length === 1, 3000)
    const recordedBeforeTheClaimFailed = (await store.webhooks.listAttempts(subscription, { limit: 10 })).attempts
    await database.query('DROP TRIGGER refuse_lease ON webhook_outbox')
    dispatcher.wake()
    await until(() => warnings.includes('webhooks: the outbox can be read again'), 3000)
    // The receiver counts a delivery when it arrives; the stop must not cut the update's attempt short.
    for (let waitedMs = 0; (await store.webhooks.getSubscription(subscription))?.delivered !== 2; waitedMs += 20) {
      if (waitedMs > 3000) throw new Error('the update was not recorded as delivered within 3 s')
      await sleep(20)
    }
    await dispatcher.stop()

    const [created, updated] = receiver.deliveries
    expect(claimErrors).toEqual([expect.any(ClaimAfterSettleError)])
    expect(warnings).toEqual(['webhooks: cannot read the outbox; trying again every poll', 'webhooks: the outbox can be read again'])
    expect([created?.body, updated?.body]).toEqual(['{"id":1,"name":"plant 1"}', '{"id":1,"name":"renamed"}'])
    expect(recordedBeforeTheClaimFailed.map(({ eventId, statusCode, attempt }) => ({ eventId, statusCode, attempt })))
      .toEqual([{ eventId: created?.id, statusCode: 204, attempt: 1 }])
    expect(await store.webhooks.getSubscription(subscription)).toMatchObject({ pending: 0, delivered: 2, failed: 0 })
    expect((await store.webhooks.listAttempts(subscription, { limit: 10 })).attempts.map(({ eventId, statusCode, attempt }) => ({ eventId, statusCode, attempt })))
      .toEqual([{ eventId: updated?.id, statusCode: 204, attempt: 1 }, { eventId: created?.id, statusCode: 204, attempt: 1 }])
  })
})
