import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { WEBHOOK_EVENT_TYPES } from '../../src/store/webhook-store.js'
import { newSigningSecret } from '../../src/webhooks/secrets.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { SERVICE_VERSION } from '../../src/version.js'
import { backends, bearer, buildTestApp, postPlant, temporaryFolder } from '../helpers/app.js'
import { listenOnLoopback, serverOfWholeRequests } from '../helpers/test-servers.js'
import { WebhookReceiver, type ReceivedDelivery } from '../helpers/webhook-receiver.js'
import {
  ADMIN_TOKEN, deliveryAttempts, subscribe, subscriptionStatus, waitFor, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS, type DeliveryAttempt
} from '../helpers/webhooks.js'

const ISO_TIME = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
const ATTEMPT_ID = expect.stringMatching(/^[0-9]+$/)

function sendPlant (app: FastifyInstance, method: 'PUT' | 'PATCH', id: string, payload: string) {
  const contentType = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json'
  return app.inject({ method, url: `/plants/${id}`, headers: { ...bearer(), 'content-type': contentType }, payload })
}

const attemptsOfEvent = (attempts: readonly DeliveryAttempt[], eventId: string) =>
  attempts.filter((attempt) => attempt.eventId === eventId).sort((a, b) => a.attempt - b.attempt)

const contentOf = ({ type, body, verified }: ReceivedDelivery) => ({ type, body, verified })

describe.each(backends)('webhook deliveries ($name)', (backend) => {
  it('sends one signed event per write that changed a plant, in commit order, and none for writes that changed nothing', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    await subscribe(app, receiver)

    expect((await postPlant(app, '{"id":9007199254740993,"name":"Fern","tag":"shade"}')).statusCode).toBe(200)
    expect((await postPlant(app, '{"id":9007199254740993,"name":"Fern","tag":"shade"}')).statusCode).toBe(200)
    const put = (payload: string) => app.inject({ method: 'PUT', url: '/plants/9007199254740993', headers: { ...bearer(), 'content-type': 'application/json' }, payload })
    expect((await put('{"id":9007199254740993,"name":"Fern","tag":"shade"}')).statusCode).toBe(200)
    expect((await put('{"id":9007199254740993,"name":"Maidenhair fern"}')).statusCode).toBe(200)
    const patch = await app.inject({ method: 'PATCH', url: '/plants/9007199254740993', headers: { ...bearer(), 'content-type': 'application/merge-patch+json' }, payload: '{"tag":"humid"}' })
    expect(patch.statusCode).toBe(200)
    expect((await app.inject({ method: 'DELETE', url: '/plants/9007199254740993', headers: bearer() })).statusCode).toBe(204)

    const deliveries = await receiver.waitForDeliveries(4)
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(deliveries.map(({ type, body, verified }) => ({ type, body, verified }))).toEqual([
      { type: 'plant.created', body: '{"id":9007199254740993,"name":"Fern","tag":"shade"}', verified: true },
      { type: 'plant.updated', body: '{"id":9007199254740993,"name":"Maidenhair fern"}', verified: true },
      { type: 'plant.updated', body: '{"id":9007199254740993,"name":"Maidenhair fern","tag":"humid"}', verified: true },
      { type: 'plant.deleted', body: '{"id":9007199254740993}', verified: true }
    ])
    expect(new Set(deliveries.map((delivery) => delivery.id)).size).toBe(4)
    for (const delivery of deliveries) {
      expect(delivery.id).toMatch(/^msg_[0-9a-f]{32}$/)
      expect(delivery.headers['content-type']).toBe('application/json')
      expect(delivery.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
      expect(Math.abs(delivery.timestamp - Date.now() / 1000)).toBeLessThan(5)
    }
  })

  it('retries an event the receiver failed with the same webhook-id and body, and reports each attempt', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(app, receiver)
    receiver.answerWith((delivery) => ({ status: receiver.deliveries.filter(({ id }) => id === delivery.id).length <= 2 ? 500 : 204 }))

    expect((await postPlant(app, '{"id":-9223372036854775808,"name":"Monstera","tag":"tropical"}')).statusCode).toBe(200)

    const deliveries = await receiver.waitForDeliveries(3)
    const status = await waitFor(() => subscriptionStatus(app, subscriptionId), ({ delivered }) => delivered === 1)
    expect(deliveries).toHaveLength(3)
    const eventId = deliveries[0]!.id
    expect(deliveries.map((delivery) => ({ id: delivery.id, ...contentOf(delivery) }))).toEqual(Array.from({ length: 3 }, () => (
      { id: eventId, type: 'plant.created', body: '{"id":-9223372036854775808,"name":"Monstera","tag":"tropical"}', verified: true }
    )))
    const [first, second, third] = deliveries as [ReceivedDelivery, ReceivedDelivery, ReceivedDelivery]
    expect(second.timestamp).toBeGreaterThanOrEqual(first.timestamp)
    expect(third.timestamp).toBeGreaterThanOrEqual(second.timestamp)

    expect(status).toEqual({
      id: subscriptionId,
      url: receiver.url,
      events: ['plant.created', 'plant.updated', 'plant.deleted'],
      createdAt: ISO_TIME,
      pending: 0,
      delivered: 1,
      failed: 0,
      lastError: { message: 'HTTP 500', at: ISO_TIME }
    })
    const attempts = await deliveryAttempts(app, subscriptionId)
    expect(attempts).toEqual([3, 2, 1].map((attempt) => ({
      id: ATTEMPT_ID, eventId, type: 'plant.created', attempt, statusCode: attempt === 3 ? 204 : 500, at: ISO_TIME
    })))
    const ids = attempts.map(({ id }) => BigInt(id))
    expect(ids[0]! > ids[1]! && ids[1]! > ids[2]!).toBe(true)
    // Retried after 200 ms, then 400 ms, each ±20 %.
    const [thirdAt, secondAt, firstAt] = attempts.map(({ at }) => Date.parse(at)) as [number, number, number]
    expect(secondAt - firstAt).toBeGreaterThanOrEqual(160)
    expect(thirdAt - secondAt).toBeGreaterThanOrEqual(320)
    expect(status.lastError?.at).toBe(attempts[1]!.at)
  })

  it('delivers every event exactly once when the receiver comes back after refusing connections for a while', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(app, receiver)
    await receiver.stop()

    const bodies = [1, 2, 3, 4, 5].map((n) => `{"id":${n},"name":"Seedling ${n}"}`)
    for (const body of bodies) expect((await postPlant(app, body)).statusCode).toBe(200)
    // The receiver stays away until every event has been refused at least once.
    const duringOutage = await waitFor(() => deliveryAttempts(app, subscriptionId),
      (attempts) => new Set(attempts.map(({ eventId }) => eventId)).size === 5)
    expect(new Set(duringOutage.map(({ eventId }) => eventId)).size).toBe(5)
    for (const attempt of duringOutage) {
      expect(attempt).toEqual({ id: ATTEMPT_ID, eventId: expect.any(String), type: 'plant.created', attempt: expect.any(Number), error: expect.stringContaining('ECONNREFUSED'), at: ISO_TIME })
    }
    await receiver.restart()

    await receiver.waitForDeliveries(5, 5000)
    const status = await waitFor(() => subscriptionStatus(app, subscriptionId), ({ delivered }) => delivered === 5)
    expect(status).toMatchObject({ pending: 0, delivered: 5, failed: 0, lastError: { message: expect.stringContaining('ECONNREFUSED'), at: ISO_TIME } })
    // Nothing is pending any more, so nothing else can arrive.
    expect(receiver.deliveries).toHaveLength(5)
    expect(new Set(receiver.deliveries.map(({ id }) => id)).size).toBe(5)
    expect(receiver.deliveries.map(contentOf).sort((a, b) => a.body.localeCompare(b.body)))
      .toEqual(bodies.map((body) => ({ type: 'plant.created', body, verified: true })))

    const attempts = await deliveryAttempts(app, subscriptionId)
    for (const delivery of receiver.deliveries) {
      const ofEvent = attemptsOfEvent(attempts, delivery.id)
      expect(ofEvent.length).toBeGreaterThanOrEqual(2)
      expect(ofEvent.map(({ attempt }) => attempt)).toEqual(ofEvent.map((_attempt, index) => index + 1))
      const last = ofEvent.pop()
      expect(last).toEqual({ id: ATTEMPT_ID, eventId: delivery.id, type: 'plant.created', attempt: ofEvent.length + 1, statusCode: 204, at: ISO_TIME })
      for (const failed of ofEvent) expect(failed.error).toContain('ECONNREFUSED')
    }
  })

  it('disables the subscription when the receiver answers 410 Gone, drops its pending events and records no more', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(app, receiver)
    receiver.answerWith(() => ({ status: 410, delayMs: 500 }))

    expect((await postPlant(app, '{"id":41,"name":"Orchid"}')).statusCode).toBe(200)
    await receiver.waitForDeliveries(1)
    // Recorded while the first event of the same plant is under way, so it waits behind it.
    expect((await sendPlant(app, 'PUT', '41', '{"name":"Moth orchid"}')).statusCode).toBe(200)

    const status = await waitFor(() => subscriptionStatus(app, subscriptionId), ({ disabledAt }) => disabledAt !== undefined)
    expect(status).toEqual({
      id: subscriptionId,
      url: receiver.url,
      events: ['plant.created', 'plant.updated', 'plant.deleted'],
      createdAt: ISO_TIME,
      disabledAt: ISO_TIME,
      disabledReason: 'the receiver answered 410 Gone',
      pending: 0,
      delivered: 0,
      failed: 2,
      lastError: { message: 'HTTP 410', at: status.disabledAt }
    })

    expect((await postPlant(app, '{"id":42,"name":"Aloe"}')).statusCode).toBe(200)
    expect((await sendPlant(app, 'PATCH', '41', '{"tag":"epiphyte"}')).statusCode).toBe(200)
    await sleep(1000)
    expect(receiver.deliveries.map(contentOf)).toEqual([{ type: 'plant.created', body: '{"id":41,"name":"Orchid"}', verified: true }])
    expect(await subscriptionStatus(app, subscriptionId)).toEqual(status)
    expect(await deliveryAttempts(app, subscriptionId)).toEqual([
      { id: ATTEMPT_ID, eventId: receiver.deliveries[0]!.id, type: 'plant.created', attempt: 1, statusCode: 410, at: status.disabledAt }
    ])
  })

  it('holds back a plant\'s later events while its first is retried, in commit order, without holding back other plants', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(app, receiver)
    const isFirstEventOfA = (delivery: ReceivedDelivery) => delivery.type === 'plant.created' && delivery.body.startsWith('{"id":101,')
    receiver.answerWith((delivery) => ({ status: isFirstEventOfA(delivery) && receiver.deliveries.filter(isFirstEventOfA).length <= 2 ? 500 : 204 }))

    expect((await postPlant(app, '{"id":101,"name":"Cactus A"}')).statusCode).toBe(200)
    await receiver.waitForDeliveries(1)
    expect((await sendPlant(app, 'PUT', '101', '{"name":"Cactus A2"}')).statusCode).toBe(200)
    expect((await sendPlant(app, 'PATCH', '101', '{"tag":"desert"}')).statusCode).toBe(200)
    expect((await postPlant(app, '{"id":202,"name":"Basil B"}')).statusCode).toBe(200)
    expect((await sendPlant(app, 'PUT', '202', '{"name":"Basil B2","tag":"herb"}')).statusCode).toBe(200)

    await receiver.waitForDeliveries(7)
    await waitFor(() => subscriptionStatus(app, subscriptionId), ({ delivered, pending }) => delivered === 5 && pending === 0)
    const deliveries = receiver.deliveries
    expect(deliveries).toHaveLength(7)
    expect(deliveries.every(({ verified }) => verified)).toBe(true)
    const ofA = deliveries.filter(({ body }) => body.startsWith('{"id":101,'))
    const ofB = deliveries.filter(({ body }) => body.startsWith('{"id":202,'))
    expect(ofA.map(contentOf)).toEqual([
      { type: 'plant.created', body: '{"id":101,"name":"Cactus A"}', verified: true },
      { type: 'plant.created', body: '{"id":101,"name":"Cactus A"}', verified: true },
      { type: 'plant.created', body: '{"id":101,"name":"Cactus A"}', verified: true },
      { type: 'plant.updated', body: '{"id":101,"name":"Cactus A2"}', verified: true },
      { type: 'plant.updated', body: '{"id":101,"name":"Cactus A2","tag":"desert"}', verified: true }
    ])
    expect(new Set(ofA.map(({ id }) => id)).size).toBe(3)
    expect(ofA[1]!.id).toBe(ofA[0]!.id)
    expect(ofA[2]!.id).toBe(ofA[0]!.id)
    expect(ofB.map(contentOf)).toEqual([
      { type: 'plant.created', body: '{"id":202,"name":"Basil B"}', verified: true },
      { type: 'plant.updated', body: '{"id":202,"name":"Basil B2","tag":"herb"}', verified: true }
    ])
    const arrival = (delivery: ReceivedDelivery) => deliveries.indexOf(delivery)
    // B went out while A's first event was still being retried; A's updates only after it succeeded.
    expect(ofB.map(arrival).every((index) => index > arrival(ofA[0]!) && index < arrival(ofA[2]!))).toBe(true)
    expect(arrival(ofA[3]!)).toBeGreaterThan(arrival(ofA[2]!))
    expect(arrival(ofA[4]!)).toBeGreaterThan(arrival(ofA[3]!))
  })

  it('refuses at delivery time to connect to a loopback address, named or written out, when private networks are not allowed', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store, tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: { ...WEBHOOK_TEST_CONFIG, allowPrivateNetworks: false } } })
    const receiver = await WebhookReceiver.start()
    const subscriptions = [
      { url: receiver.url, refusal: /^EWEBHOOKINTERNAL 127\.0\.0\.1 resolves to 127\.0\.0\.1, an internal address \(WEBHOOK_ALLOW_PRIVATE_NETWORKS is not true\)$/ },
      { url: `http://localhost:${receiver.port}/hooks`, refusal: /^EWEBHOOKINTERNAL localhost resolves to (127\.0\.0\.1|::1), an internal address \(WEBHOOK_ALLOW_PRIVATE_NETWORKS is not true\)$/ }
    ].map((subscription) => ({ ...subscription, id: randomUUID() }))
    for (const { id, url } of subscriptions) {
      // Stored directly: the API would refuse these URLs (400) before any delivery.
      await store.webhooks.createSubscription({ id, url, events: [...WEBHOOK_EVENT_TYPES], createdAt: Date.now(), storedSecret: newSigningSecret() })
    }

    expect((await postPlant(app, '{"id":7,"name":"Ivy"}')).statusCode).toBe(200)

    for (const { id, refusal } of subscriptions) {
      const attempts = await waitFor(() => deliveryAttempts(app, id), (page) => page.length >= 2)
      expect(attempts).toEqual(attempts.map((_attempt, index) => ({
        id: ATTEMPT_ID, eventId: expect.stringMatching(/^msg_[0-9a-f]{32}$/), type: 'plant.created', attempt: attempts.length - index, error: expect.stringMatching(refusal), at: ISO_TIME
      })))
      expect(await subscriptionStatus(app, id)).toMatchObject({ pending: 1, delivered: 0, failed: 0, lastError: { message: expect.stringMatching(refusal) } })
    }
    expect(receiver.deliveries).toEqual([])
  })
})

describe('an instance with WEBHOOK_DELIVERY=false', () => {
  it('records events that an instance on the same SQLite file delivers, and sends none itself', async () => {
    const file = join(temporaryFolder(), 'plants.db')
    const recording = await buildTestApp({
      store: openSqliteStore(file),
      tokens: WEBHOOK_TEST_TOKENS,
      config: { webhooks: { ...WEBHOOK_TEST_CONFIG, deliver: false } }
    })
    const receiver = await WebhookReceiver.start()
    const subscription = await subscribe(recording, receiver)

    expect((await postPlant(recording, { id: 1, name: 'Aloe' })).statusCode).toBe(200)
    await sleep(500)
    expect(receiver.deliveries).toEqual([])
    const status = await recording.inject({ method: 'GET', url: `/admin/webhooks/${subscription}`, headers: bearer(ADMIN_TOKEN) })
    expect(status.json()).toMatchObject({ pending: 1, delivered: 0 })

    await buildTestApp({ store: openSqliteStore(file), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const [delivery] = await receiver.waitForDeliveries(1)
    expect(delivery).toMatchObject({ type: 'plant.created', body: '{"id":1,"name":"Aloe"}', verified: true })
  })
})

describe('a receiver that answers with a redirect', () => {
  it('is not followed: the attempt failed with its status and the event is sent to the subscribed URL again', async () => {
    const app = await buildTestApp({ tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    receiver.answerWith(() => receiver.deliveries.length === 1 ? { status: 307, headers: { location: `${receiver.url}/elsewhere` } } : { status: 204 })
    const subscription = await subscribe(app, receiver)

    expect((await postPlant(app, { id: 1, name: 'Aloe' })).statusCode).toBe(200)
    const [first, second] = await receiver.waitForDeliveries(2)
    await sleep(300)

    expect(receiver.deliveries).toHaveLength(2)
    expect(second?.id).toBe(first?.id)
    const attempts = await app.inject({ method: 'GET', url: `/admin/webhooks/${subscription}/deliveries`, headers: bearer(ADMIN_TOKEN) })
    expect(attempts.json<Array<{ attempt: number, statusCode?: number }>>().map(({ attempt, statusCode }) => ({ attempt, statusCode })))
      .toEqual([{ attempt: 2, statusCode: 204 }, { attempt: 1, statusCode: 307 }])
  })
})

const LONG_ANSWER_BYTES = 64 << 20

describe('a receiver that answers with a body', () => {
  it('is read up to 4 KiB: a longer answer counts by its status and is cut off with its connection, a short one is read whole', async () => {
    const app = await buildTestApp({ tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const received: string[] = []
    const answersCutOff: boolean[] = []
    const server = serverOfWholeRequests((_request, body, response) => {
      received.push(body.toString('utf8'))
      const index = received.length - 1
      response.writeHead(200, { 'content-type': 'text/plain' })
      if (index > 0) {
        response.end('ok', () => { answersCutOff[index] = false })
        return
      }
      // 64 MiB, 64 KiB at a time, unless the connection closes first.
      const chunk = Buffer.alloc(1 << 16, 'x')
      let handedOver = 0
      response.on('close', () => { answersCutOff[index] = handedOver < LONG_ANSWER_BYTES })
      const more = () => {
        while (handedOver < LONG_ANSWER_BYTES && !response.destroyed) {
          handedOver += chunk.length
          if (!response.write(chunk)) return
        }
        if (handedOver >= LONG_ANSWER_BYTES) response.end()
      }
      response.on('drain', more)
      more()
    })
    const port = await listenOnLoopback(server, () => new Promise((resolve) => { server.close(() => { resolve() }); server.closeAllConnections() }))
    const created = await app.inject({ method: 'POST', url: '/admin/webhooks', headers: bearer(ADMIN_TOKEN), payload: { url: `http://127.0.0.1:${port}/hooks` } })
    const subscription = created.json<{ id: string }>().id

    for (const id of [1, 2, 3]) {
      expect((await postPlant(app, { id, name: `Plant ${id}` })).statusCode).toBe(200)
      await waitFor(() => subscriptionStatus(app, subscription), (status) => status.delivered === id)
    }

    expect(received).toEqual(['{"id":1,"name":"Plant 1"}', '{"id":2,"name":"Plant 2"}', '{"id":3,"name":"Plant 3"}'])
    expect(answersCutOff).toEqual([true, false, false])
    expect(await subscriptionStatus(app, subscription)).toMatchObject({ pending: 0, delivered: 3, failed: 0 })
    expect((await deliveryAttempts(app, subscription)).map(({ attempt, statusCode, error }) => ({ attempt, statusCode, error })))
      .toEqual([1, 1, 1].map((attempt) => ({ attempt, statusCode: 200, error: undefined })))
  })
})

describe('a receiver whose URL has a query', () => {
  it('is posted to at its path with the query, under the service\'s user agent, as JSON, with the event\'s headers', async () => {
    const app = await buildTestApp({ tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const requests: Array<{ method: string | undefined, url: string | undefined, userAgent: string | undefined, contentType: string | undefined, event: string | undefined }> = []
    const server = serverOfWholeRequests((request, _body, response) => {
      const { method, url, headers } = request
      requests.push({ method, url, userAgent: headers['user-agent'], contentType: headers['content-type'], event: headers['webhook-event'] as string | undefined })
      response.writeHead(204).end()
    })
    const port = await listenOnLoopback(server, () => new Promise((resolve) => { server.close(() => { resolve() }); server.closeAllConnections() }))
    const created = await app.inject({
      method: 'POST', url: '/admin/webhooks', headers: bearer(ADMIN_TOKEN), payload: { url: `http://127.0.0.1:${port}/hooks/plants?key=a%20b&x=1` }
    })
    const subscription = created.json<{ id: string }>().id

    expect((await postPlant(app, { id: 1, name: 'Fern' })).statusCode).toBe(200)
    await waitFor(() => subscriptionStatus(app, subscription), (status) => status.delivered === 1)

    expect(requests).toEqual([{
      method: 'POST', url: '/hooks/plants?key=a%20b&x=1', userAgent: `plantstore/${SERVICE_VERSION} (webhooks)`, contentType: 'application/json', event: 'plant.created'
    }])
  })
})
