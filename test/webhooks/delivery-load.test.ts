import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, postPlant } from '../helpers/app.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { subscribe, subscriptionStatus, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'

const WRITERS = 32
const WRITES_PER_WRITER = 66
/** Far above 2^53, so an id that passed through a double would show. */
const FIRST_ID = 9_007_199_254_740_993n

interface Plant {
  readonly name: string
  readonly tag?: string
}

interface ExpectedEvent {
  readonly type: 'plant.created' | 'plant.updated' | 'plant.deleted'
  readonly body: string
}

/** The event body, and the PUT and PATCH answer, of a plant: the form the store writes (exact int64 id, tag only when set). */
function plantDocument (id: bigint, { name, tag }: Plant): string {
  return `{"id":${id},"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`
}

/** A small seeded generator (mulberry32), so a failing mix of writes can be replayed. */
function randomSource (seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * One writer: a sequence of writes to plants only it touches, each answer checked against its own model
 * of those plants, recording the event every acknowledged change must cause (per plant, in commit order).
 */
async function runWriter (
  app: FastifyInstance,
  writer: number,
  expectedEvents: Map<string, ExpectedEvent[]>,
  unexpectedAnswers: string[]
): Promise<void> {
  const random = randomSource(writer + 1)
  const plants = new Map<bigint, Plant>()
  let nextId = FIRST_ID + BigInt(writer) * 10_000n
  let version = 0
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T
  const newPlant = (): Plant => {
    version++
    const name = `Plant ${writer}-${version} é`
    return random() < 0.5 ? { name } : { name, tag: pick(['shade', 'sun', 'humid', '']) }
  }
  const expectEvent = (id: bigint, event: ExpectedEvent) => {
    const key = id.toString()
    expectedEvents.set(key, [...(expectedEvents.get(key) ?? []), event])
  }
  const check = (description: string, response: LightMyRequestResponse, status: number, body: string) => {
    if (response.statusCode !== status || response.body !== body) {
      unexpectedAnswers.push(`${description}: expected ${status} ${body}, got ${response.statusCode} ${response.body}`)
    }
  }
  const send = (method: 'PUT' | 'PATCH' | 'DELETE', id: bigint, payload?: string) => app.inject({
    method,
    url: `/plants/${id}`,
    headers: payload === undefined ? bearer() : { ...bearer(), 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' },
    ...(payload === undefined ? {} : { payload })
  })

  for (let write = 0; write < WRITES_PER_WRITER; write++) {
    const live = [...plants.keys()]
    const roll = random()
    if (live.length < 2 || roll < 0.2) {
      const id = nextId++
      const plant = newPlant()
      const created = random() < 0.75
      const response = created
        ? await postPlant(app, plantDocument(id, plant))
        : await send('PUT', id, JSON.stringify(plant))
      if (created) check(`POST ${id}`, response, 200, JSON.stringify(plant))
      else check(`PUT ${id} (new)`, response, 201, plantDocument(id, plant))
      plants.set(id, plant)
      expectEvent(id, { type: 'plant.created', body: plantDocument(id, plant) })
      continue
    }
    const id = pick(live)
    const plant = plants.get(id) as Plant
    if (roll < 0.35) {
      check(`POST ${id} (replay)`, await postPlant(app, plantDocument(id, plant)), 200, JSON.stringify(plant))
    } else if (roll < 0.55) {
      const replacement = newPlant()
      check(`PUT ${id}`, await send('PUT', id, JSON.stringify(replacement)), 200, plantDocument(id, replacement))
      plants.set(id, replacement)
      expectEvent(id, { type: 'plant.updated', body: plantDocument(id, replacement) })
    } else if (roll < 0.65) {
      check(`PUT ${id} (unchanged)`, await send('PUT', id, plantDocument(id, plant)), 200, plantDocument(id, plant))
    } else if (roll < 0.85) {
      const tag = pick([undefined, 'shade', 'sun', 'humid', ''])
      const patched: Plant = tag === undefined ? { name: plant.name } : { name: plant.name, tag }
      const response = await send('PATCH', id, JSON.stringify({ tag: tag ?? null }))
      check(`PATCH ${id} tag ${String(tag)}`, response, 200, plantDocument(id, patched))
      if (patched.tag !== plant.tag) {
        plants.set(id, patched)
        expectEvent(id, { type: 'plant.updated', body: plantDocument(id, patched) })
      }
    } else {
      check(`DELETE ${id}`, await send('DELETE', id), 204, '')
      plants.delete(id)
      expectEvent(id, { type: 'plant.deleted', body: `{"id":${id}}` })
    }
  }
}

describe.each(backends)('webhook deliveries under load ($name)', (backend) => {
  it('sends exactly one event per acknowledged change from 32 concurrent writers, each plant\'s in commit order', { timeout: 60_000 }, async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(app, receiver)
    const expectedEvents = new Map<string, ExpectedEvent[]>()
    const unexpectedAnswers: string[] = []

    await Promise.all(Array.from({ length: WRITERS }, (_, writer) => runWriter(app, writer, expectedEvents, unexpectedAnswers)))

    expect(unexpectedAnswers).toEqual([])
    const expectedCount = [...expectedEvents.values()].reduce((sum, events) => sum + events.length, 0)
    expect(WRITERS * WRITES_PER_WRITER).toBeGreaterThanOrEqual(2000)
    await receiver.waitForDeliveries(expectedCount, 30_000)
    const deadline = Date.now() + 10_000
    let status = await subscriptionStatus(app, subscriptionId)
    while (status.delivered < expectedCount && Date.now() < deadline) {
      await sleep(25)
      status = await subscriptionStatus(app, subscriptionId)
    }
    // With every event settled and none pending, nothing else can arrive.
    expect(status).toMatchObject({ pending: 0, delivered: expectedCount, failed: 0 })
    expect(status.lastError).toBeUndefined()

    const deliveries = receiver.deliveries
    expect(deliveries.filter(({ verified }) => !verified)).toEqual([])
    expect(new Set(deliveries.map(({ id }) => id)).size).toBe(expectedCount)
    expect(deliveries).toHaveLength(expectedCount)
    const receivedEvents = new Map<string, ExpectedEvent[]>()
    for (const { type, body } of deliveries) {
      const plantId = /^\{"id":(-?\d+)[,}]/.exec(body)?.[1] ?? body
      receivedEvents.set(plantId, [...(receivedEvents.get(plantId) ?? []), { type: type as ExpectedEvent['type'], body }])
    }
    expect(Object.fromEntries(receivedEvents)).toEqual(Object.fromEntries(expectedEvents))
  })

  it('answers writes at once while a slow receiver holds every delivery for 2 s, and delivers them afterwards', { timeout: 30_000 }, async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    await subscribe(app, receiver)
    receiver.answerWith(() => ({ status: 204, delayMs: 2000 }))

    const bodies = Array.from({ length: 50 }, (_, n) => `{"id":${n + 1},"name":"Slow ${n + 1}"}`)
    const durations: number[] = []
    for (const body of bodies) {
      const started = performance.now()
      const response = await postPlant(app, body)
      durations.push(performance.now() - started)
      expect(response.statusCode).toBe(200)
    }
    const arrivedWhileWriting = receiver.deliveries.length

    expect(Math.max(...durations)).toBeLessThan(500)
    expect(arrivedWhileWriting).toBeLessThan(bodies.length)
    const deliveries = await receiver.waitForDeliveries(bodies.length, 20_000)
    expect(deliveries.map(({ type, body, verified }) => ({ type, body, verified })).sort((a, b) => a.body.localeCompare(b.body)))
      .toEqual(bodies.map((body) => ({ type: 'plant.created', body, verified: true })).sort((a, b) => a.body.localeCompare(b.body)))
  })
})
