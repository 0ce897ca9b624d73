import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, postPlant } from '../helper.js'
import { WebhookReceiver } from './receiver.js'
import { subscribe, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from './webhook-helper.js'

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
})
