import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { startWriteLoad, until } from '../helpers/load.js'

const PLANTS_KEY = 'webhook-crash-plants-4b7e1d'
const ADMIN_KEY = 'webhook-crash-admin-9c2f60'
const FIRST_WAVE = 150
const SECOND_WAVE = 150
/** Acknowledged writes of the second wave before the kill. */
const KILL_AFTER = 100
/** The receiver holds every answer this long, so deliveries are under way when the server is killed. */
const RECEIVER_DELAY_MS = 300
const LEASE_MS = 11_000

const adminHeaders = { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' }

async function subscribe (baseUrl: string, receiver: WebhookReceiver): Promise<string> {
  const response = await fetch(`${baseUrl}/admin/webhooks`, { method: 'POST', headers: adminHeaders, body: JSON.stringify({ url: receiver.url }) })
  const body = await response.json() as { id: string, secret: string }
  expect(response.status, JSON.stringify(body)).toBe(201)
  receiver.useSecret(body.secret)
  return body.id
}

async function storedPlant (baseUrl: string, id: number): Promise<string | undefined> {
  const response = await fetch(`${baseUrl}/plants/${id}`, { headers: { authorization: `Bearer ${PLANTS_KEY}` } })
  const body = await response.text()
  if (response.status === 404) return undefined
  expect(response.status, body).toBe(200)
  return body
}

async function pendingEvents (baseUrl: string, subscriptionId: string): Promise<number> {
  const response = await fetch(`${baseUrl}/admin/webhooks/${subscriptionId}`, { headers: adminHeaders })
  const body = await response.json() as { pending: number }
  expect(response.status, JSON.stringify(body)).toBe(200)
  return body.pending
}

describe.each([
  { name: 'sqlite', databaseUrl: async () => `sqlite:${join(temporaryFolder(), 'webhooks.db')}` },
  { name: 'postgres', databaseUrl: createTestDatabase }
])('webhook deliveries across kill -9 on $name', ({ name, databaseUrl }) => {
  it('deliver, after the restart, the event of every stored plant (every acknowledged one among them) and of no other', { timeout: 90_000 }, async () => {
    const env = {
      DATABASE_URL: await databaseUrl(),
      PLANTSTORE_TOKENS: `name=plants;scopes=plants:read+plants:write;${PLANTS_KEY},name=admin;scopes=admin;${ADMIN_KEY}`,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_FIRST_MS: '200',
      WEBHOOK_RETRY_MAX_MS: '1000',
      WEBHOOK_LEASE_MS: String(LEASE_MS)
    }
    const receiver = await WebhookReceiver.start()
    receiver.answerWith(() => ({ status: 204, delayMs: RECEIVER_DELAY_MS }))
    const first = await startServer(env)
    const subscriptionId = await subscribe(first.baseUrl, receiver)

    // A first wave fills the outbox. The kill comes during a second wave, while writes are under way and so are
    // deliveries: once some were made and settled, and while one the receiver has not answered yet is out.
    const firstWave = startWriteLoad(first.baseUrl, PLANTS_KEY, { workers: 16, firstId: 1, maxRequests: FIRST_WAVE })
    await until(() => firstWave.acknowledged.size + firstWave.unanswered.size === FIRST_WAVE, 20_000, 'the first wave')
    await firstWave.stop()
    expect(firstWave.acknowledged.size).toBe(FIRST_WAVE)
    const deliveriesUnderWay = () => receiver.deliveries.filter((delivery) => Date.now() - delivery.receivedAt < RECEIVER_DELAY_MS - 50).length
    await until(() => receiver.deliveries.length >= 48 && deliveriesUnderWay() > 0, 10_000, 'deliveries under way')
    const atKill = { at: 0, received: 0, underWay: 0 }
    const kill = () => {
      atKill.underWay = deliveriesUnderWay()
      atKill.received = new Set(receiver.deliveries.map((delivery) => delivery.id)).size
      atKill.at = Date.now()
      process.kill(first.child.pid as number, 'SIGKILL')
    }
    const secondWave = startWriteLoad(first.baseUrl, PLANTS_KEY, {
      workers: 16,
      firstId: FIRST_WAVE + 1,
      maxRequests: SECOND_WAVE,
      onAcknowledged: (count) => { if (atKill.at === 0 && count >= KILL_AFTER && deliveriesUnderWay() > 0) kill() }
    })
    await until(() => atKill.at !== 0 || secondWave.acknowledged.size + secondWave.unanswered.size === SECOND_WAVE, 20_000, 'the second wave')
    if (atKill.at === 0) {
      await until(() => deliveriesUnderWay() > 0, 5000, 'a delivery under way')
      kill()
    }
    expect(await first.exited).toBe('SIGKILL')
    await secondWave.stop()
    const acknowledged = new Map([...firstWave.acknowledged, ...secondWave.acknowledged])
    const unacknowledged = secondWave.unanswered
    expect(atKill.underWay).toBeGreaterThan(0)
    expect(atKill.received).toBeLessThan(acknowledged.size)

    const second = await startServer(env)
    const stored = new Map<number, string>()
    for (const id of [...acknowledged.keys(), ...unacknowledged.keys()]) {
      const document = await storedPlant(second.baseUrl, id)
      if (document !== undefined) stored.set(id, document)
    }
    for (const [id, plantName] of acknowledged) expect(stored.get(id)).toBe(JSON.stringify({ id, name: plantName }))
    for (const [id, plantName] of unacknowledged) expect([undefined, JSON.stringify({ id, name: plantName })]).toContain(stored.get(id))

    const deliveredPlants = () => new Set(receiver.deliveries.map((delivery) => (JSON.parse(delivery.body) as { id: number }).id))
    await until(() => [...stored.keys()].every((id) => deliveredPlants().has(id)), LEASE_MS + 30_000, 'the event of every stored plant')
    const deadline = Date.now() + 10_000
    while (await pendingEvents(second.baseUrl, subscriptionId) > 0) {
      if (Date.now() > deadline) throw new Error('events still pending 10 s after every plant had its event')
      await new Promise((resolve) => setTimeout(resolve, 100))
    }

    const deliveries = receiver.deliveries.slice()
    expect(deliveries.filter((delivery) => !delivery.verified || delivery.type !== 'plant.created')).toEqual([])
    const eventsByPlant = new Map<number, Set<string>>()
    for (const delivery of deliveries) {
      const id = (JSON.parse(delivery.body) as { id: number }).id
      expect(delivery.body).toBe(stored.get(id))
      eventsByPlant.set(id, (eventsByPlant.get(id) ?? new Set()).add(delivery.id))
    }
    expect([...eventsByPlant.keys()].sort((a, b) => a - b)).toEqual([...stored.keys()].sort((a, b) => a - b))
    expect([...eventsByPlant.values()].filter((events) => events.size !== 1)).toEqual([])

    const distinct = new Set(deliveries.map((delivery) => delivery.id)).size
    const committedUnacknowledged = [...unacknowledged.keys()].filter((id) => stored.has(id)).length
    console.log(`webhook kill -9 (${name}): expected ${stored.size}, delivered ${distinct}, duplicated ${deliveries.length - distinct} ` +
      `(acknowledged ${acknowledged.size}, unacknowledged ${unacknowledged.size} of which committed ${committedUnacknowledged}, ` +
      `received before the kill ${atKill.received}, under way at the kill ${atKill.underWay})`)
  })
})
