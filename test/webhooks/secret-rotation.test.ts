import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, expectError, postPlant } from '../helpers/app.js'
import { verifiesWith, WebhookReceiver, type ReceivedDelivery } from '../helpers/webhook-receiver.js'
import { ADMIN_TOKEN, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/
const UNKNOWN_ID = '5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'
const DAY_MS = 24 * 3600_000

interface Rotated { id: string, secret: string, previousSecretExpiresAt: string }

function rotate (app: FastifyInstance, id: string, payload?: object, headers: Record<string, string> = bearer(ADMIN_TOKEN)) {
  return app.inject({ method: 'POST', url: `/admin/webhooks/${id}/rotate-secret`, headers, ...(payload === undefined ? {} : { payload }) })
}

async function subscribed (app: FastifyInstance, url: string): Promise<{ id: string, secret: string }> {
  const response = await app.inject({ method: 'POST', url: '/admin/webhooks', headers: bearer(ADMIN_TOKEN), payload: { url } })
  expect(response.statusCode, response.body).toBe(201)
  return response.json()
}

const signaturesOf = (delivery: ReceivedDelivery) => String(delivery.headers['webhook-signature']).split(' ')

describe.each(backends)('rotating a subscription\'s signing secret ($name)', (backend) => {
  const openApp = async () => await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })

  it('answers the new secret once, keeps the pending events, and signs them with both secrets for 24 h by default', async () => {
    const app = await openApp()
    const receiver = await WebhookReceiver.start()
    receiver.answerWith(() => ({ status: 503 }))
    const { id, secret: old } = await subscribed(app, receiver.url)
    expect((await postPlant(app, { id: 1, name: 'Fern' })).statusCode).toBe(200)
    await receiver.waitForDeliveries(1)
    // Closed, so that no attempt signed before the rotation can arrive after it.
    await receiver.stop()
    const beforeRotation = receiver.deliveries.length

    const before = Date.now()
    const response = await rotate(app, id)

    expect(response.statusCode, response.body).toBe(200)
    const rotated = response.json<Rotated>()
    expect(rotated).toEqual({ id, secret: expect.stringMatching(SECRET), previousSecretExpiresAt: expect.stringMatching(ISO_TIME) })
    expect(rotated.secret).not.toBe(old)
    expect(Date.parse(rotated.previousSecretExpiresAt) - before).toBeGreaterThanOrEqual(DAY_MS)
    expect(Date.parse(rotated.previousSecretExpiresAt) - Date.now()).toBeLessThanOrEqual(DAY_MS)
    expect(response.headers['cache-control']).toBe('no-store')
    const status = await app.inject({ method: 'GET', url: `/admin/webhooks/${id}`, headers: bearer(ADMIN_TOKEN) })
    expect(status.json()).toMatchObject({ pending: 1, delivered: 0, previousSecretExpiresAt: rotated.previousSecretExpiresAt })

    receiver.answerWith(() => ({ status: 204 }))
    await receiver.restart()
    expect((await postPlant(app, { id: 2, name: 'Ivy' })).statusCode).toBe(200)
    await receiver.waitForDeliveries(beforeRotation + 2)
    const afterRotation = receiver.deliveries.slice(beforeRotation)
    expect(afterRotation.map(({ body }) => body).sort()).toEqual(['{"id":1,"name":"Fern"}', '{"id":2,"name":"Ivy"}'])
    for (const delivery of afterRotation) {
      expect(signaturesOf(delivery)).toEqual([expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/), expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/)])
      expect({ withNew: verifiesWith(delivery, rotated.secret), withOld: verifiesWith(delivery, old) }).toEqual({ withNew: true, withOld: true })
    }
    for (const delivery of receiver.deliveries.slice(0, beforeRotation)) expect(signaturesOf(delivery)).toHaveLength(1)
  })

  it('with expiresInSeconds 0 signs with the new secret alone at once; with 3600 with both, the previous one kept until then', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store, tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    const { id, secret: first } = await subscribed(app, receiver.url)

    const now = await rotate(app, id, { expiresInSeconds: 0 })
    expect(now.statusCode, now.body).toBe(200)
    const second = now.json<Rotated>()
    expect(Math.abs(Date.parse(second.previousSecretExpiresAt) - Date.now())).toBeLessThan(1000)
    expect(await store.webhooks.storedSecrets()).toEqual([{ id, storedSecret: expect.stringMatching(SECRET) }])
    const status = await app.inject({ method: 'GET', url: `/admin/webhooks/${id}`, headers: bearer(ADMIN_TOKEN) })
    expect(status.json()).not.toHaveProperty('previousSecretExpiresAt')
    expect((await postPlant(app, { id: 1, name: 'Fern' })).statusCode).toBe(200)
    const [immediate] = await receiver.waitForDeliveries(1)
    expect(signaturesOf(immediate!)).toHaveLength(1)
    expect({ withNew: verifiesWith(immediate!, second.secret), withOld: verifiesWith(immediate!, first) }).toEqual({ withNew: true, withOld: false })

    const third = (await rotate(app, id, { expiresInSeconds: 3600 })).json<Rotated>()
    expect(await store.webhooks.storedSecrets()).toEqual([{
      id, storedSecret: third.secret, storedPreviousSecret: second.secret, previousSecretUntil: Date.parse(third.previousSecretExpiresAt)
    }])
    expect((await postPlant(app, { id: 2, name: 'Ivy' })).statusCode).toBe(200)
    const during = (await receiver.waitForDeliveries(2))[1]!
    expect([verifiesWith(during, third.secret), verifiesWith(during, second.secret), verifiesWith(during, first)]).toEqual([true, true, false])
  })

  it('answers 404 for an unknown subscription, 400 for a grace period out of bounds, 401 and 403 before anything else', async () => {
    const app = await openApp()
    const { id } = await subscribed(app, 'http://127.0.0.1:9/hooks')

    expectError(await rotate(app, UNKNOWN_ID), 404, `no webhook subscription has id "${UNKNOWN_ID}"`)
    for (const expiresInSeconds of [-1, 604801, 1.5, '60', null]) {
      expectError(await rotate(app, id, { expiresInSeconds }), 400, 'expiresInSeconds must be a whole number from 0 to 604800')
    }
    expect((await rotate(app, id, { expiresInSeconds: 604800 })).statusCode).toBe(200)
    const anonymous = await rotate(app, UNKNOWN_ID, { expiresInSeconds: -1 }, {})
    expectError(anonymous, 401, 'this operation needs an "Authorization: Bearer <token>" header')
    expectError(await rotate(app, UNKNOWN_ID, { expiresInSeconds: -1 }, bearer()), 403, 'this token lacks the scope "admin", which this operation needs')
    const text = await app.inject({ method: 'POST', url: `/admin/webhooks/${id}/rotate-secret`, headers: { ...bearer(ADMIN_TOKEN), 'content-type': 'text/plain' }, payload: '{}' })
    expect(text.statusCode).toBe(415)
  })
})
