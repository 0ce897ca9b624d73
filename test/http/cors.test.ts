import { connect, type AddressInfo } from 'node:net'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { AppConfig } from '../../src/app.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { bearer, buildTestApp, expectError, memoryBackend, sharedTestApp, TEST_TOKEN } from '../helpers/app.js'

const ORIGIN = 'https://app.example.com'
const OTHER_ORIGIN = 'https://elsewhere.example.org'
const READ_ONLY_TOKEN = 'cors-read-only-token'
const TOKENS = [TEST_TOKEN, `name=reader;scopes=plants:read;${READ_ONLY_TOKEN}`]

const NODE_MAJOR = Number(process.versions.node.split('.')[0])
const EXPOSED = 'Link, Location, ETag, Retry-After, X-Total-Count, Preference-Applied, x-request-id'
const PREFLIGHT_ANSWER = {
  'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE',
  'access-control-allow-headers': 'Authorization, Content-Type, If-Match, If-None-Match, Prefer, Last-Event-ID, x-request-id, traceparent, tracestate',
  'access-control-max-age': '7200'
}

function appWith (corsOrigins: AppConfig['corsOrigins'], options: { store?: PlantStore, config?: Partial<AppConfig> } = {}): Promise<FastifyInstance> {
  return buildTestApp({ tokens: TOKENS, ...options, config: { ...options.config, ...(corsOrigins === undefined ? {} : { corsOrigins }) } })
}

/** The response headers CORS is about: `access-control-*` and `vary`. */
function corsHeadersOf (response: { headers: Record<string, unknown> }): Record<string, unknown> {
  return Object.fromEntries(Object.entries(response.headers).filter(([name]) => name.startsWith('access-control-') || name === 'vary'))
}

function preflight (app: FastifyInstance, url: string, method = 'POST', origin = ORIGIN): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'OPTIONS',
    url,
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' }
  })
}

describe('CORS for listed origins (CORS_ORIGINS=https://app.example.com,…)', () => {
  // Two apps for the tests that store nothing and read no list: one per CORS_ORIGINS they need.
  const twoOrigins = sharedTestApp(memoryBackend, { tokens: TOKENS, config: { corsOrigins: [OTHER_ORIGIN, ORIGIN] } })
  const oneOrigin = sharedTestApp(memoryBackend, { tokens: TOKENS, config: { corsOrigins: [ORIGIN] } })

  it.each([
    ['/plants', 'POST'],
    ['/plants?limit=5', 'GET'],
    ['/plants/5', 'PATCH'],
    ['/plants/not-an-id', 'DELETE'],
    ['/admin/tokens', 'POST'],
    ['/admin/webhooks/abc/deliveries', 'GET'],
    ['/healthz', 'GET'],
    ['/readyz', 'GET'],
    ['/openapi.json', 'GET']
  ])('answers a preflight for %s (%s) with a 204 without a token', async (url, method) => {
    const app = twoOrigins()

    const response = await preflight(app, url, method)

    expect(response.statusCode).toBe(204)
    expect(response.body).toBe('')
    expect(corsHeadersOf(response)).toEqual({
      'access-control-allow-origin': ORIGIN,
      'access-control-expose-headers': EXPOSED,
      vary: 'Origin',
      ...PREFLIGHT_ANSWER
    })
    expect(response.headers['x-request-id']).toMatch(/^[\x21-\x7e]{1,128}$/)
    expect(response.headers['www-authenticate']).toBeUndefined()
    expect(response.headers['content-length']).toBeUndefined()
  })

  it('refuses a preflight from an origin not in CORS_ORIGINS with a 403 Error naming the variable', async () => {
    const app = oneOrigin()

    const response = await preflight(app, '/plants', 'POST', OTHER_ORIGIN)

    expectError(response, 403, `the origin "${OTHER_ORIGIN}" may not call this API from a browser: it is not in CORS_ORIGINS`)
    expect(corsHeadersOf(response)).toEqual({ 'access-control-expose-headers': EXPOSED, vary: 'Origin' })
  })

  it('compares origins exactly: scheme, host and port', async () => {
    const app = oneOrigin()

    for (const near of ['http://app.example.com', 'https://app.example.com:8443', 'https://APP.example.com', 'https://app.example.com.evil.test', 'null']) {
      expect((await preflight(app, '/plants', 'POST', near)).statusCode).toBe(403)
    }
  })

  it.each([['/nope'], ['/plants/5/leaves'], ['/admin/nothing']])('answers a preflight for the unknown path %s with a 404 Error', async (url) => {
    const app = oneOrigin()

    const response = await preflight(app, `${url}?q=1`)

    expectError(response, 404, `no route OPTIONS ${url}`)
    expect(corsHeadersOf(response)).toEqual({ 'access-control-allow-origin': ORIGIN, 'access-control-expose-headers': EXPOSED, vary: 'Origin' })
  })

  it('lets a script on an allowed origin read a created plant\'s Location, ETag and request id, and a page\'s Link', async () => {
    const app = await appWith([ORIGIN])
    const headers = { origin: ORIGIN, ...bearer() }

    const created = await app.inject({ method: 'POST', url: '/plants', headers: { ...headers, 'content-type': 'application/json' }, payload: '{"id":1,"name":"fern"}' })
    await app.inject({ method: 'POST', url: '/plants', headers: { ...headers, 'content-type': 'application/json' }, payload: '{"id":2,"name":"moss"}' })
    const page = await app.inject({ method: 'GET', url: '/plants?limit=1', headers })

    expect(created.statusCode).toBe(200)
    expect(created.headers).toMatchObject({ location: '/plants/1', etag: expect.stringMatching(/^"/) })
    expect(corsHeadersOf(created)).toEqual({ 'access-control-allow-origin': ORIGIN, 'access-control-expose-headers': EXPOSED, vary: 'Origin' })
    expect(page.statusCode).toBe(200)
    expect(page.headers.link).toBe('</plants?limit=1&after=1>; rel="next"')
    // A page depends on Prefer too (Prefer: count=exact).
    expect(corsHeadersOf(page)).toEqual({ 'access-control-allow-origin': ORIGIN, 'access-control-expose-headers': EXPOSED, vary: 'Origin, Prefer' })
  })

  it('answers a request from an origin not listed as without CORS: no Access-Control-Allow-Origin, so the browser withholds it', async () => {
    const app = await appWith([ORIGIN])

    const response = await app.inject({ method: 'GET', url: '/plants', headers: { origin: OTHER_ORIGIN, ...bearer() } })

    expect(response.statusCode).toBe(200)
    expect(response.body).toBe('[]')
    expect(corsHeadersOf(response)).toEqual({ 'access-control-expose-headers': EXPOSED, vary: 'Origin, Prefer' })
  })

  it.each<[string, number, InjectOptions]>([
    ['no token', 401, { method: 'GET', url: '/plants' }],
    ['a token without the scope', 403, { method: 'POST', url: '/plants', headers: { ...bearer(READ_ONLY_TOKEN), 'content-type': 'application/json' }, payload: '{"id":1,"name":"a"}' }],
    ['an admin path without a token', 401, { method: 'GET', url: '/admin/tokens' }],
    ['a missing plant', 404, { method: 'GET', url: '/plants/99', headers: bearer() }],
    ['an unknown path', 404, { method: 'GET', url: '/nope' }],
    ['a method the path lacks', 405, { method: 'PATCH', url: '/plants', headers: bearer() }],
    ['a method /healthz lacks', 405, { method: 'DELETE', url: '/healthz' }],
    ['a body that is not JSON', 415, { method: 'POST', url: '/plants', headers: { ...bearer(), 'content-type': 'text/plain' }, payload: 'fern' }],
    ['an invalid body', 400, { method: 'POST', url: '/plants', headers: { ...bearer(), 'content-type': 'application/json' }, payload: '{"id":"x"}' }]
  ])('puts the CORS headers on the Error answer to %s (%i), so a script can read it', async (_case, status, request) => {
    const app = oneOrigin()

    const response = await app.inject({ ...request, headers: { ...request.headers, origin: ORIGIN } })

    expect(response.statusCode).toBe(status)
    expect(response.json()).toMatchObject({ error: status })
    expect(corsHeadersOf(response)).toEqual({ 'access-control-allow-origin': ORIGIN, 'access-control-expose-headers': EXPOSED, vary: 'Origin' })
  })

  it('puts the CORS headers on the 503 of load shedding', async () => {
    let openGate = () => {}
    const gate = new Promise<void>((resolve) => { openGate = resolve })
    const memory = openMemoryStore()
    const store: PlantStore = { ...memory, create: async (plant) => { await gate; return memory.create(plant) } }
    const app = await appWith([ORIGIN], { store, config: { maxInFlightRequests: 1 } })

    const holding = app.inject({ method: 'POST', url: '/plants', headers: { ...bearer(), 'content-type': 'application/json' }, payload: '{"id":1,"name":"a"}' })
    await new Promise(setImmediate)
    const shed = await app.inject({ method: 'GET', url: '/plants/1', headers: { ...bearer(), origin: ORIGIN } })
    openGate()
    await holding

    expectError(shed, 503, /^the service is overloaded, retry later/)
    expect(shed.headers['retry-after']).toBe('1')
    expect(corsHeadersOf(shed)).toEqual({ 'access-control-allow-origin': ORIGIN, 'access-control-expose-headers': EXPOSED, vary: 'Origin' })
  })

  it('puts the CORS headers on the 503 of a request that arrives while the service shuts down (Node 26 closes its connection unanswered)', async () => {
    let openGate = () => {}
    const gate = new Promise<void>((resolve) => { openGate = resolve })
    let enterCreate = () => {}
    const inCreate = new Promise<void>((resolve) => { enterCreate = resolve })
    const memory = openMemoryStore()
    const store: PlantStore = { ...memory, create: async (plant) => { enterCreate(); await gate; return memory.create(plant) } }
    const app = await appWith([ORIGIN], { store })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address() as AddressInfo
    const body = '{"id":1,"name":"a"}'
    const inFlight = openConnection(address)
    inFlight.send(`POST /plants HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${TEST_TOKEN}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
    const late = openConnection(address)
    late.send('GET /plants/1 HTTP/1.1\r\n')
    await inCreate

    const closed = app.close()
    await expect.poll(() => app.server.listening).toBe(false)
    if (NODE_MAJOR >= 26) {
      // Node 26 ends, unanswered, a connection whose request has not fully arrived when the shutdown begins.
      await expect.poll(() => late.ended()).toBe(true)
      openGate()
      await closed
      expect(late.received()).toBe('')
      return
    }
    late.send(`Host: x\r\nOrigin: ${ORIGIN}\r\nAuthorization: Bearer ${TEST_TOKEN}\r\n\r\n`)
    await expect.poll(() => late.received()).toMatch(/\}$/)
    openGate()
    await closed

    const refused = late.received()
    expect(refused).toMatch(/^HTTP\/1\.1 503 /)
    expect(refused).toContain(`\r\naccess-control-allow-origin: ${ORIGIN}\r\n`)
    expect(refused).toContain(`\r\naccess-control-expose-headers: ${EXPOSED}\r\n`)
    expect(refused).toContain('\r\nvary: Origin\r\n')
    expect(refused).toMatch(/\r\n\r\n\{"error":503,"message":"the service is shutting down, retry later; request id [^"]+"\}$/)
  })

  it('answers a plain OPTIONS (not a preflight) as without CORS: 401 without a token, then 405 with Allow, 404 for an unknown path', async () => {
    const app = await appWith([ORIGIN])

    const unauthenticated = await app.inject({ method: 'OPTIONS', url: '/plants', headers: { origin: ORIGIN } })
    const authenticated = await app.inject({ method: 'OPTIONS', url: '/plants/5', headers: { origin: ORIGIN, ...bearer() } })
    const open = await app.inject({ method: 'OPTIONS', url: '/healthz' })
    const unknown = await app.inject({ method: 'OPTIONS', url: '/nope', headers: { 'access-control-request-method': 'GET' } })

    expectError(unauthenticated, 401, /Authorization/)
    expectError(authenticated, 405, '/plants/5 does not support OPTIONS; allowed: DELETE, GET, HEAD, PATCH, PUT')
    expect(authenticated.headers.allow).toBe('DELETE, GET, HEAD, PATCH, PUT')
    expect(corsHeadersOf(authenticated)).toEqual({ 'access-control-allow-origin': ORIGIN, 'access-control-expose-headers': EXPOSED, vary: 'Origin' })
    expectError(open, 405, '/healthz does not support OPTIONS; allowed: GET, HEAD')
    expectError(unknown, 404, 'no route OPTIONS /nope')
  })
})

describe('CORS for every origin (CORS_ORIGINS=*)', () => {
  it('answers any origin\'s preflight with Access-Control-Allow-Origin: *, and no Vary, since the answer does not depend on the origin', async () => {
    const app = await appWith('*')

    const response = await preflight(app, '/plants/5', 'PUT', OTHER_ORIGIN)
    const read = await app.inject({ method: 'GET', url: '/plants/5', headers: { origin: OTHER_ORIGIN, ...bearer() } })

    expect(response.statusCode).toBe(204)
    expect(corsHeadersOf(response)).toEqual({ 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED, ...PREFLIGHT_ANSWER })
    expectError(read, 404, 'no plant has id 5')
    expect(corsHeadersOf(read)).toEqual({ 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED })
  })
})

describe('The answers CORS must leave alone', () => {
  const requests: Array<[string, string, Record<string, string>]> = [
    ['OPTIONS', '/plants', bearer()],
    ['OPTIONS', '/plants/5', bearer()],
    ['OPTIONS', '/plants', {}],
    ['OPTIONS', '/healthz', {}],
    ['OPTIONS', '/admin/tokens', bearer()],
    ['OPTIONS', '/nope', {}],
    ['OPTIONS', '/plants/1/leaves', bearer()],
    ['PATCH', '/plants', bearer()],
    ['TRACE', '/plants', bearer()],
    ['POST', '/plants/5', bearer()],
    ['PUT', '/healthz', {}],
    ['DELETE', '/readyz', {}],
    ['PUT', '/openapi.json', {}],
    ['GET', '/nope', {}],
    ['GET', '/docs/nothing-here', {}],
    ['GET', '/plants/1/leaves', bearer()]
  ]

  it.each(['*' as const, [ORIGIN]])('keeps every 404, 405 and Allow list as they are without CORS (CORS_ORIGINS=%j)', async (corsOrigins) => {
    const withoutCors = await appWith(undefined)
    const withCors = await appWith(corsOrigins)
    const answerOf = async (app: FastifyInstance, [method, url, headers]: [string, string, Record<string, string>]) => {
      const response = await app.inject({ method: method as 'GET', url, headers })
      return { status: response.statusCode, allow: response.headers.allow, body: response.json() as unknown }
    }

    for (const request of requests) {
      expect(await answerOf(withCors, request), `${request[0]} ${request[1]}`).toEqual(await answerOf(withoutCors, request))
    }
    expect(await answerOf(withCors, ['OPTIONS', '/plants', bearer()])).toEqual({
      status: 405, allow: 'GET, HEAD, POST', body: { error: 405, message: '/plants does not support OPTIONS; allowed: GET, HEAD, POST' }
    })
  })

  it('sends no CORS header when CORS_ORIGINS is empty, and answers a preflight as any OPTIONS: with a token first', async () => {
    const app = await appWith([])

    const read = await app.inject({ method: 'GET', url: '/plants', headers: { origin: ORIGIN, ...bearer() } })
    const unauthenticated = await preflight(app, '/plants')
    const authenticated = await app.inject({ method: 'OPTIONS', url: '/plants', headers: { origin: ORIGIN, 'access-control-request-method': 'POST', ...bearer() } })

    expect(read.statusCode).toBe(200)
    expect(corsHeadersOf(read)).toEqual({ vary: 'Prefer' })
    expectError(unauthenticated, 401, /Authorization/)
    expect(corsHeadersOf(unauthenticated)).toEqual({})
    expectError(authenticated, 405, '/plants does not support OPTIONS; allowed: GET, HEAD, POST')
  })
})

/** A raw connection to a listening app: bytes sent as they are, everything answered collected. */
function openConnection (address: AddressInfo): { send: (bytes: string) => void, received: () => string, ended: () => boolean } {
  const socket = connect(address.port, address.address)
  onTestFinished(() => { socket.destroy() })
  let answer = ''
  let ended = false
  socket.on('data', (chunk: Buffer) => { answer += chunk.toString() })
  socket.on('close', () => { ended = true })
  socket.on('error', () => {})
  return { send: (bytes) => { socket.write(bytes) }, received: () => answer, ended: () => ended }
}
