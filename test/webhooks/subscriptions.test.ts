import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it } from 'vitest'
import type { AppConfig } from '../../src/app.js'
import Database from '../../src/store/sqlite/driver.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { backends, bearer, buildTestApp, expectError, postPlant, sharedTestApp, temporaryFolder, type Backend } from '../helpers/app.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { ADMIN_TOKEN, subscribe, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'

const ALL_EVENTS = ['plant.created', 'plant.updated', 'plant.deleted']
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const UNKNOWN_ID = '5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'
/** Nothing listens on the discard port; no test here writes a plant while such a subscription exists. */
const SILENT_URL = 'http://127.0.0.1:9/hooks/plantstore'
const PRIVATE_NETWORK_RULE = 'the service allows that only with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true'

interface Subscription { id: string, url: string, events: string[], createdAt: string }
interface DeliveryAttempt { id: string, eventId: string, type: string, attempt: number, statusCode?: number, error?: string, at: string }

async function openApp (backend: Backend, config: Partial<AppConfig> = { webhooks: WEBHOOK_TEST_CONFIG }): Promise<FastifyInstance> {
  return await buildTestApp({ store: await backend.open(), tokens: WEBHOOK_TEST_TOKENS, config })
}

const admin = (app: FastifyInstance, method: 'GET' | 'DELETE', url: string) =>
  app.inject({ method, url, headers: bearer(ADMIN_TOKEN) })

const create = (app: FastifyInstance, payload: object) =>
  app.inject({ method: 'POST', url: '/admin/webhooks', headers: bearer(ADMIN_TOKEN), payload })

async function created (app: FastifyInstance, payload: object): Promise<Subscription & { secret: string }> {
  const response = await create(app, payload)
  expect(response.statusCode, response.body).toBe(201)
  return response.json()
}

const withoutSecret = ({ secret: _secret, ...subscription }: Subscription & { secret: string }): Subscription => subscription

/** Waits until the clock has moved past `createdAt`, so the next subscription is strictly newer. */
async function afterMillisecondOf (createdAt: string): Promise<void> {
  while (Date.now() <= Date.parse(createdAt)) await sleep(1)
}

async function expectNoSubscriptions (app: FastifyInstance): Promise<void> {
  const list = await admin(app, 'GET', '/admin/webhooks')
  expect({ status: list.statusCode, body: list.json() }).toEqual({ status: 200, body: [] })
}

describe.each(backends)('the /admin/webhooks API ($name)', (backend) => {
  // Three apps the tests of this backend share: one on which every test makes and reads subscriptions of
  // its own; two on which nothing is ever stored (every test there is refused), so each can still prove
  // that its refusal stored nothing by the empty list. A test that lists or counts every subscription, or
  // writes plants (which the subscriptions of others would be sent), builds its own.
  const ownSubscriptions = sharedTestApp(backend, { tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
  const refusals = sharedTestApp(backend, { tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
  const refusalsByDefault = sharedTestApp(backend, { tokens: WEBHOOK_TEST_TOKENS, config: {} })

  it('creates a subscription: 201, its Location, no-store, the secret shown once, all three events by default', async () => {
    const app = ownSubscriptions()
    const before = Date.now()

    const response = await create(app, { url: SILENT_URL })

    expect(response.statusCode).toBe(201)
    const body = response.json()
    expect(body).toEqual({
      id: expect.stringMatching(UUID),
      url: SILENT_URL,
      events: ALL_EVENTS,
      createdAt: expect.stringMatching(ISO_TIME),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/)
    })
    expect(Buffer.from(body.secret.slice('whsec_'.length), 'base64')).toHaveLength(32)
    expect(Date.parse(body.createdAt)).toBeGreaterThanOrEqual(before)
    expect(Date.parse(body.createdAt)).toBeLessThanOrEqual(Date.now())
    expect(response.headers.location).toBe(`/admin/webhooks/${body.id}`)
    expect(response.headers['cache-control']).toBe('no-store')
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
  })

  it('keeps the events a subscription names, and gives every subscription its own id and secret', async () => {
    const app = ownSubscriptions()

    const deletions = await created(app, { url: SILENT_URL, events: ['plant.deleted', 'plant.created'] })
    const everything = await created(app, { url: SILENT_URL, events: ALL_EVENTS })

    expect(deletions.events).toEqual(['plant.deleted', 'plant.created'])
    expect(everything.events).toEqual(ALL_EVENTS)
    expect(deletions.id).not.toBe(everything.id)
    expect(deletions.secret).not.toBe(everything.secret)
  })

  it('lists every subscription newest first, without secrets', async () => {
    const app = await openApp(backend)
    const first = await created(app, { url: `${SILENT_URL}/1` })
    await afterMillisecondOf(first.createdAt)
    const second = await created(app, { url: `${SILENT_URL}/2`, events: ['plant.updated'] })
    await afterMillisecondOf(second.createdAt)
    const third = await created(app, { url: `${SILENT_URL}/3` })

    const response = await admin(app, 'GET', '/admin/webhooks')

    expect({ status: response.statusCode, body: response.json() }).toEqual({
      status: 200,
      body: [withoutSecret(third), withoutSecret(second), withoutSecret(first)]
    })
    expect(response.body).not.toContain('whsec_')
  })

  it('reads one subscription with no deliveries yet: counts 0 and no lastError', async () => {
    const app = ownSubscriptions()
    const subscription = await created(app, { url: SILENT_URL, events: ['plant.created'] })

    const response = await admin(app, 'GET', `/admin/webhooks/${subscription.id}`)

    expect({ status: response.statusCode, body: response.json() }).toEqual({
      status: 200,
      body: { ...withoutSecret(subscription), pending: 0, delivered: 0, failed: 0 }
    })
    expect(response.body).not.toContain('whsec_')
  })

  it('deletes a subscription: 204 without a body, then 404 for it everywhere and gone from the list', async () => {
    const app = await openApp(backend)
    const kept = await created(app, { url: `${SILENT_URL}/kept` })
    const { id } = await created(app, { url: `${SILENT_URL}/deleted` })

    const deletion = await admin(app, 'DELETE', `/admin/webhooks/${id}`)

    expect(deletion.statusCode).toBe(204)
    expect(deletion.body).toBe('')
    const gone = `no webhook subscription has id "${id}"`
    expectError(await admin(app, 'GET', `/admin/webhooks/${id}`), 404, gone)
    expectError(await admin(app, 'DELETE', `/admin/webhooks/${id}`), 404, gone)
    expectError(await admin(app, 'GET', `/admin/webhooks/${id}/deliveries`), 404, gone)
    expect((await admin(app, 'GET', '/admin/webhooks')).json()).toEqual([withoutSecret(kept)])
  })

  it('pages the deliveries of a fresh subscription as an empty array without Link; an unknown id is a 404', async () => {
    const app = ownSubscriptions()
    const { id } = await created(app, { url: SILENT_URL })

    const page = await admin(app, 'GET', `/admin/webhooks/${id}/deliveries`)

    expect({ status: page.statusCode, body: page.json() }).toEqual({ status: 200, body: [] })
    expect(page.headers.link).toBeUndefined()
    expectError(await admin(app, 'GET', `/admin/webhooks/${UNKNOWN_ID}/deliveries`), 404, `no webhook subscription has id "${UNKNOWN_ID}"`)
    expectError(await admin(app, 'GET', `/admin/webhooks/${UNKNOWN_ID}`), 404, `no webhook subscription has id "${UNKNOWN_ID}"`)
    expectError(await admin(app, 'DELETE', `/admin/webhooks/${UNKNOWN_ID}`), 404, `no webhook subscription has id "${UNKNOWN_ID}"`)
  })

  it.each([
    ['events is empty', { url: SILENT_URL, events: [] }, 'events must not be empty'],
    ['an event is unknown', { url: SILENT_URL, events: ['plant.created', 'plant.eaten'] }, 'events.1 must be one of plant.created, plant.updated, plant.deleted'],
    ['an event is named twice', { url: SILENT_URL, events: ['plant.created', 'plant.deleted', 'plant.created'] }, 'events must not hold the same value twice'],
    ['url is missing', { events: ['plant.created'] }, 'url is required'],
    ['url is not a URL', { url: 'not a url' }, 'url must be an absolute http or https URL'],
    ['url is not http or https', { url: 'ftp://example.com/hooks' }, 'url must be an http or https URL, not ftp'],
    ['url is longer than 2048 characters', { url: `https://example.com/${'a'.repeat(2029)}` }, 'url must be at most 2048 characters long']
  ])('refuses a subscription whose %s with 400 and stores nothing', async (_case, payload, message) => {
    const app = refusals()

    expectError(await create(app, payload), 400, message)
    await expectNoSubscriptions(app)
  })

  it('accepts a URL of exactly 2048 characters', async () => {
    const app = ownSubscriptions()
    const url = `https://example.com/${'a'.repeat(2028)}`
    expect(url).toHaveLength(2048)

    expect((await created(app, { url })).url).toBe(url)
  })

  it('answers every operation with 401 without a token and 403 for a token without the admin scope', async () => {
    const app = await openApp(backend)
    const { id } = await created(app, { url: SILENT_URL })
    const operations = [
      { method: 'POST', url: '/admin/webhooks', payload: { url: SILENT_URL } },
      { method: 'GET', url: '/admin/webhooks' },
      { method: 'GET', url: `/admin/webhooks/${id}` },
      { method: 'DELETE', url: `/admin/webhooks/${id}` },
      { method: 'GET', url: `/admin/webhooks/${id}/deliveries` }
    ] as const

    for (const operation of operations) {
      const anonymous = await app.inject(operation)
      expectError(anonymous, 401, 'this operation needs an "Authorization: Bearer <token>" header')
      expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="plantstore"')
      const plantsOnly = await app.inject({ ...operation, headers: bearer() })
      expectError(plantsOnly, 403, 'this token lacks the scope "admin", which this operation needs')
      expect(plantsOnly.headers['www-authenticate']).toBe('Bearer realm="plantstore", error="insufficient_scope", scope="admin"')
    }
    expect((await admin(app, 'GET', '/admin/webhooks')).json()).toHaveLength(1)
  })

  it.each([
    ['http://127.0.0.1/x', '127.0.0.1'],
    ['http://10.0.0.8/', '10.0.0.8'],
    ['http://172.16.0.1/', '172.16.0.1'],
    ['http://172.31.255.254:8443/hooks', '172.31.255.254'],
    ['http://192.168.1.10/', '192.168.1.10'],
    ['http://169.254.169.254/latest', '169.254.169.254'],
    ['http://100.100.100.200/latest/meta-data/', '100.100.100.200'],
    ['http://[::1]/', '::1'],
    ['http://localhost:8080/', 'localhost'],
    ['http://hooks.localhost/', 'hooks.localhost'],
    ['http://0.0.0.0:8080/', '0.0.0.0'],
    ['http://localhost./', 'localhost.'],
    ['http://hooks.localhost./', 'hooks.localhost.'],
    ['http://localhost../', 'localhost..'],
    ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1'],
    ['http://[::127.0.0.1]/', '::7f00:1'],
    ['http://[64:ff9b::a00:8]/', '64:ff9b::a00:8'],
    ['http://[2002:7f00:1::]/', '2002:7f00:1::'],
    ['http://[::ffff:8.8.8.8]/', '::ffff:808:808'],
    ['http://[2001::1]/', '2001::1'],
    ['http://[100::1]/', '100::1']
  ])('refuses %s by default (WEBHOOK_ALLOW_PRIVATE_NETWORKS unset) and stores nothing', async (url, shown) => {
    const app = refusalsByDefault()

    expectError(await create(app, { url }), 400,
      `url must not reach a loopback, private or link-local address (${shown}); ${PRIVATE_NETWORK_RULE}`)
    await expectNoSubscriptions(app)
  })

  it('accepts those URLs when WEBHOOK_ALLOW_PRIVATE_NETWORKS=true', async () => {
    const app = await openApp(backend)
    const urls = ['http://127.0.0.1/x', 'http://10.0.0.8/', 'http://169.254.169.254/latest', 'http://[::1]/', 'http://localhost:8080/', 'http://[::ffff:127.0.0.1]/']

    for (const url of urls) expect((await created(app, { url })).url).toBe(url)
    expect((await admin(app, 'GET', '/admin/webhooks')).json()).toHaveLength(urls.length)
  })

  it('pages delivery attempts newest first with limit and after, linking the next page while there is one', async () => {
    const app = await openApp(backend)
    const receiver = await WebhookReceiver.start()
    const id = await subscribe(app, receiver)
    for (let plant = 1; plant <= 5; plant++) expect((await postPlant(app, { id: plant, name: `Fern ${plant}` })).statusCode).toBe(200)

    const deliveries = await receiver.waitForDeliveries(5)
    const status = await subscriptionOnceSettled(app, id, 5)

    expect(status).toMatchObject({ pending: 0, delivered: 5, failed: 0 })
    expect(status).not.toHaveProperty('lastError')
    const first = await admin(app, 'GET', `/admin/webhooks/${id}/deliveries?limit=2`)
    const second = await admin(app, 'GET', `/admin/webhooks/${id}/deliveries?limit=2&after=${attemptsOf(first)[1]?.id}`)
    const third = await admin(app, 'GET', `/admin/webhooks/${id}/deliveries?limit=2&after=${attemptsOf(second)[1]?.id}`)
    const pages = [first, second, third]
    expect(pages.map((page) => [page.statusCode, attemptsOf(page).length])).toEqual([[200, 2], [200, 2], [200, 1]])
    expect(first.headers.link).toBe(`</admin/webhooks/${id}/deliveries?limit=2&after=${attemptsOf(first)[1]?.id}>; rel="next"`)
    expect(second.headers.link).toBe(`</admin/webhooks/${id}/deliveries?limit=2&after=${attemptsOf(second)[1]?.id}>; rel="next"`)
    expect(third.headers.link).toBeUndefined()

    const attempts = pages.flatMap(attemptsOf)
    const ids = attempts.map((attempt) => BigInt(attempt.id))
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0)))
    expect(new Set(ids).size).toBe(5)
    for (const attempt of attempts) {
      expect(attempt).toEqual({
        id: expect.stringMatching(/^[0-9]+$/),
        eventId: expect.stringMatching(/^msg_[0-9a-f]{32}$/),
        type: 'plant.created',
        attempt: 1,
        statusCode: 204,
        at: expect.stringMatching(ISO_TIME)
      })
    }
    expect(attempts.map((attempt) => attempt.eventId).sort()).toEqual(deliveries.map((delivery) => delivery.id).sort())

    const whole = await admin(app, 'GET', `/admin/webhooks/${id}/deliveries?limit=5`)
    expect(attemptsOf(whole)).toEqual(attempts)
    expect(whole.headers.link).toBeUndefined()
    const unlimited = await admin(app, 'GET', `/admin/webhooks/${id}/deliveries`)
    expect(attemptsOf(unlimited)).toEqual(attempts)
    const pastTheOldest = await admin(app, 'GET', `/admin/webhooks/${id}/deliveries?limit=2&after=${attempts[4]?.id}`)
    expect({ status: pastTheOldest.statusCode, body: pastTheOldest.json(), link: pastTheOldest.headers.link }).toEqual({ status: 200, body: [], link: undefined })
  })

  it.each([
    ['limit=0', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
    ['limit=1001', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
    ['after=abc', 'query parameter after must be a canonical decimal integer from -9223372036854775808 to 9223372036854775807']
  ])('refuses a deliveries page with %s', async (query, message) => {
    const app = ownSubscriptions()
    const { id } = await created(app, { url: SILENT_URL })

    expectError(await admin(app, 'GET', `/admin/webhooks/${id}/deliveries?${query}`), 400, message)
  })
})

describe('signing secrets at rest with WEBHOOK_SECRETS_KEY (SQLite)', () => {
  it('stores the secret sealed, never as the client received it, and still signs deliveries that verify with it', async () => {
    const file = join(temporaryFolder(), 'plants.db')
    const app = await buildTestApp({
      store: openSqliteStore(file),
      tokens: WEBHOOK_TEST_TOKENS,
      config: { webhooks: { ...WEBHOOK_TEST_CONFIG, secretsKey: randomBytes(32) } }
    })
    const receiver = await WebhookReceiver.start()
    const response = await create(app, { url: receiver.url })
    expect(response.statusCode).toBe(201)
    const { id, secret } = response.json<{ id: string, secret: string }>()
    receiver.useSecret(secret)

    expect((await postPlant(app, '{"id":9007199254740993,"name":"Fern"}')).statusCode).toBe(200)
    const [delivery] = await receiver.waitForDeliveries(1)

    expect(delivery).toMatchObject({ type: 'plant.created', body: '{"id":9007199254740993,"name":"Fern"}', verified: true })
    const reader = new Database(file, { readonly: true, fileMustExist: true })
    let stored: string
    try {
      stored = (reader.prepare('SELECT secret FROM webhook_subscriptions WHERE id = ?').get(id) as { secret: string }).secret
    } finally {
      reader.close()
    }
    expect(stored).toMatch(/^sealed:v1:[A-Za-z0-9+/]+={0,2}$/)
    const key = secret.slice('whsec_'.length)
    expect(stored).not.toContain(key)
    for (const part of [file, `${file}-wal`].filter(existsSync)) {
      const bytes = readFileSync(part)
      expect(bytes.includes(key), `${part} holds the secret`).toBe(false)
      expect(bytes.includes(Buffer.from(key, 'base64')), `${part} holds the secret's key bytes`).toBe(false)
    }
  })
})

function attemptsOf (page: LightMyRequestResponse): DeliveryAttempt[] {
  return page.json<DeliveryAttempt[]>()
}

/** Polls the subscription until `delivered` events are recorded as delivered; fails after 10 s. */
async function subscriptionOnceSettled (app: FastifyInstance, id: string, delivered: number): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const response = await admin(app, 'GET', `/admin/webhooks/${id}`)
    expect(response.statusCode).toBe(200)
    const status = response.json<Record<string, unknown>>()
    if (status.delivered === delivered && status.pending === 0) return status
    if (Date.now() > deadline) throw new Error(`the subscription shows ${JSON.stringify(status)} after 10 s, not ${delivered} delivered`)
    await sleep(20)
  }
}

describe('the log line of a new subscription', () => {
  it('names its URL without the user info and query, which may hold the receiver\'s credentials', async () => {
    const chunks: string[] = []
    const logStream = new Writable({ write (chunk: Buffer, _encoding, done) { chunks.push(chunk.toString()); done() } })
    const app = await buildTestApp({ tokens: WEBHOOK_TEST_TOKENS, logStream, config: { logLevel: 'info', webhooks: WEBHOOK_TEST_CONFIG } })

    const subscription = await created(app, { url: 'https://hooks:receiver-password@example.com/plantstore?key=receiver-key' })
    await app.close()

    const line = chunks.join('').split('\n').filter((text) => text !== '').map((text) => JSON.parse(text) as { msg?: string, webhook?: unknown })
      .find((entry) => entry.msg === 'webhook subscription created')
    expect(line?.webhook).toEqual({ id: subscription.id, url: 'https://example.com/plantstore', events: ['plant.created', 'plant.updated', 'plant.deleted'] })
    expect(chunks.join('')).not.toMatch(/receiver-password|receiver-key/)
  })
})
