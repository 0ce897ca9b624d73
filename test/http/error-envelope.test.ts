import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import Database from '../../src/store/sqlite/driver.js'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { StoreUnavailableError } from '../../src/store/plant-store.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { bearer, buildTestApp, expectError, memoryBackend, postPlant, sharedTestApp, temporaryFolder } from '../helpers/app.js'

function openSocket (app: FastifyInstance): Socket {
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('app is not listening')
  const socket = connect(address.port, '127.0.0.1')
  onTestFinished(() => { socket.destroy() })
  return socket
}

/** Sends raw bytes to a listening app and resolves with everything it answers until it closes the connection. */
function rawExchange (app: FastifyInstance, request: string): Promise<string> {
  return exchangeOn(openSocket(app), request)
}

function exchangeOn (socket: Socket, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = ''
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')))
    socket.on('data', (chunk) => { answer += chunk.toString() })
    socket.on('end', () => resolve(answer))
    socket.on('close', () => resolve(answer))
    socket.on('error', reject)
    socket.write(request)
  })
}

function parseRawResponse (raw: string) {
  const [head = '', ...rest] = raw.split('\r\n\r\n')
  const [statusLine = '', ...headerLines] = head.split('\r\n')
  const headers = Object.fromEntries(headerLines.map((line) => {
    const colon = line.indexOf(':')
    return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]
  }))
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n\r\n')) as unknown }
}

async function listeningApp (store?: PlantStore): Promise<FastifyInstance> {
  const app = await buildTestApp(store === undefined ? {} : { store })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return app
}

describe('The error envelope', () => {
  // One app for the tests that store nothing and need no listening socket or store of their own.
  const shared = sharedTestApp(memoryBackend)

  describe('from the router', () => {
    it('answers an unknown path with a 404 Error', async () => {
      const app = shared()

      expectError(await app.inject({ method: 'GET', url: '/nowhere?x=1' }), 404, 'no route GET /nowhere')
    })

    it.each([
      ['/healthz', 'POST', 'GET, HEAD'],
      ['/readyz', 'DELETE', 'GET, HEAD'],
      ['/openapi.json', 'PUT', 'GET, HEAD']
    ])('answers %s with an unsupported method with a 405 and Allow', async (url, method, allow) => {
      const app = shared()

      const response = await app.inject({ method: method as 'POST', url })

      expectError(response, 405, `${url} does not support ${method}; allowed: ${allow}`)
      expect(response.headers.allow).toBe(allow)
    })

    it.each([
      ['PATCH', '/plants', 'GET, HEAD, POST'],
      ['PUT', '/plants', 'GET, HEAD, POST'],
      ['POST', '/plants/5', 'DELETE, GET, HEAD, PATCH, PUT'],
      ['OPTIONS', '/plants/5', 'DELETE, GET, HEAD, PATCH, PUT'],
      ['OPTIONS', '/plants', 'GET, HEAD, POST'],
      ['TRACE', '/plants', 'GET, HEAD, POST']
    ])('answers an authenticated %s %s with a 405 and Allow', async (method, url, allow) => {
      const app = shared()

      const response = await app.inject({ method: method as 'PATCH', url, headers: bearer() })

      expectError(response, 405, `${url} does not support ${method}; allowed: ${allow}`)
      expect(response.headers.allow).toBe(allow)
    })

    it('answers a method the router does not know (PROPFIND) on a known path with a 405, after authentication', async () => {
      const app = await listeningApp()

      const unauthenticated = parseRawResponse(await rawExchange(app, 'PROPFIND /plants HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'))
      const authenticated = parseRawResponse(await rawExchange(app, 'PROPFIND /plants HTTP/1.1\r\nHost: x\r\n' +
        `Authorization: ${bearer().authorization}\r\nConnection: close\r\n\r\n`))

      expect(unauthenticated.status).toBe(401)
      expect(authenticated.status).toBe(405)
      expect(authenticated.body).toEqual({ error: 405, message: '/plants does not support PROPFIND; allowed: GET, HEAD, POST' })
      expect(authenticated.headers.allow).toBe('GET, HEAD, POST')
    })

    it('answers an unknown path below /plants with a 404, after authentication', async () => {
      const app = shared()

      expectError(await app.inject({ method: 'GET', url: '/plants/1/leaves', headers: bearer() }), 404, 'no route GET /plants/1/leaves')
      expectError(await app.inject({ method: 'GET', url: '/plants/1/leaves' }), 401, /Authorization/)
    })

    it('answers an overlong path segment with a 414 Error', async () => {
      const app = shared()

      expectError(await app.inject({ method: 'GET', url: `/plants/${'1'.repeat(120)}`, headers: bearer() }), 414,
        'a path segment of the request URL is too long')
    })

    it('answers a body shorter than its Content-Length with a 400 Error', async () => {
      const app = shared()

      const response = await app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...bearer(), 'content-type': 'application/json', 'content-length': '50' },
        payload: '{"id":1,"name":"a"}'
      })

      expectError(response, 400, 'Request body size did not match Content-Length')
    })

    it('answers a URL that cannot be decoded with a 400 Error, after authentication', async () => {
      const app = shared()

      expectError(await app.inject({ method: 'GET', url: '/plants/%E0%A4%A', headers: bearer() }), 400, 'the request URL is malformed')
      expectError(await app.inject({ method: 'GET', url: '/plants/%E0%A4%A' }), 401, /Authorization/)
    })
  })

  describe('x-request-id', () => {
    it('reuses a short printable incoming id', async () => {
      const app = shared()

      const response = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'trace-abc.123' } })

      expect(response.headers['x-request-id']).toBe('trace-abc.123')
    })

    it.each([
      ['one character', '7'],
      ['128 characters, the longest', 'r'.repeat(128)],
      ['every visible ASCII character', Array.from({ length: 0x7f - 0x21 }, (_, index) => String.fromCharCode(0x21 + index)).join('')]
    ])('reuses an incoming id of %s, on an error as on a success', async (_case, incoming) => {
      const app = shared()

      const served = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': incoming } })
      const refused = await app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': incoming } })

      expect(served.headers['x-request-id']).toBe(incoming)
      expect(refused.headers['x-request-id']).toBe(incoming)
      expectError(refused, 404, 'no route GET /nowhere')
    })

    it('makes a new id per request: a UUIDv8 whose random part is fixed per process, then a counter', async () => {
      const app = shared()

      const ids = await Promise.all(Array.from({ length: 3 }, async () =>
        (await app.inject({ method: 'GET', url: '/healthz' })).headers['x-request-id'] as string))

      for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      expect(new Set(ids).size).toBe(3)
      expect(new Set(ids.map((id) => id.slice(0, 24))).size).toBe(1)
      const counters = ids.map((id) => Number.parseInt(id.slice(24), 16)).sort((a, b) => a - b)
      expect(counters).toEqual([counters[0], (counters[0] ?? 0) + 1, (counters[0] ?? 0) + 2])
    })

    it.each([
      ['too long', 'x'.repeat(129)],
      ['with a space', 'two words'],
      ['with a control character', 'abc\u0001def'],
      ['empty', '']
    ])('replaces an incoming id that is %s', async (_case, incoming) => {
      const app = shared()

      const response = await app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': incoming } })

      expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
      expectError(response, 404, 'no route GET /nowhere')
    })

    it.each([
      ['a created plant', 'POST', '/plants', 200],
      ['a plant read', 'GET', '/plants/7', 200],
      ['a page', 'GET', '/plants?limit=1', 200],
      ['a delete', 'DELETE', '/plants/7', 204],
      ['a missing plant', 'GET', '/plants/8', 404],
      ['a 405', 'POST', '/plants/7', 405],
      ['liveness', 'GET', '/healthz', 200],
      ['readiness', 'GET', '/readyz', 200],
      ['the OpenAPI document', 'GET', '/openapi.json', 200]
    ])('is on every reply, %s included', async (_case, method, url, status) => {
      const app = await buildTestApp()
      await postPlant(app, { id: 7, name: 'Fern' })

      const response = await app.inject({
        method: method as 'GET',
        url,
        headers: { ...bearer(), 'x-request-id': `every-reply-${status}` },
        ...(method === 'POST' ? { payload: { id: 9, name: 'Ivy' } } : {})
      })

      expect(response.statusCode).toBe(status)
      expect(response.headers['x-request-id']).toBe(`every-reply-${status}`)
    })
  })

  describe('from storage', () => {
    it('answers 503 with Retry-After while another process holds the SQLite write lock, then recovers', async () => {
      const file = join(temporaryFolder(), 'locked.db')
      const app = await buildTestApp({ store: openSqliteStore(file, { busyTimeoutMs: 50 }) })
      const otherProcess = new Database(file)
      onTestFinished(() => { otherProcess.close() })
      otherProcess.exec('BEGIN IMMEDIATE')

      const whileLocked = await postPlant(app, { id: 1, name: 'Fern' })
      otherProcess.exec('ROLLBACK')
      const afterwards = await postPlant(app, { id: 1, name: 'Other' })

      expectError(whileLocked, 503, /^storage is unavailable, retry later; request id [0-9a-f-]{36}$/)
      expect(whileLocked.json().message).toContain(whileLocked.headers['x-request-id'])
      expect(whileLocked.headers['retry-after']).toBe('1')
      expect(afterwards.statusCode).toBe(200)
    })

    it('answers /readyz with 503 while storage is down and /healthz with 200', async () => {
      const store = openMemoryStore()
      const app = await buildTestApp({ store: { ...store, checkWritable: () => Promise.reject(new StoreUnavailableError('down')) } })

      const ready = await app.inject({ method: 'GET', url: '/readyz' })
      const live = await app.inject({ method: 'GET', url: '/healthz' })

      expectError(ready, 503, /^storage is unavailable, retry later; request id /)
      expect(ready.headers['retry-after']).toBe('1')
      expect({ status: live.statusCode, body: live.json() }).toEqual({ status: 200, body: { status: 'ok' } })
    })

    it('answers an unexpected exception with a 500 naming the request id and nothing internal', async () => {
      const secret = 'SELECT secret FROM plants WHERE token = \'abc\' /home/app/src/store.ts:12'
      const store: PlantStore = { ...openMemoryStore(), create: () => Promise.reject(new Error(secret)) }
      const app = await buildTestApp({ store })

      const response = await postPlant(app, { id: 1, name: 'Fern' })

      expectError(response, 500, `internal error; quote request id ${response.headers['x-request-id']} to the operator`)
      expect(response.body).not.toContain('SELECT')
    })
  })

  describe('from the HTTP parser, on a real socket', () => {
    it('answers a malformed request line with a 400 Error', async () => {
      const app = await listeningApp()

      const response = parseRawResponse(await rawExchange(app, 'GARBAGE\r\n\r\n'))

      expect(response.status).toBe(400)
      expect(response.body).toEqual({ error: 400, message: 'the HTTP request is malformed' })
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
    })

    it('answers an HTTP/1.1 request without Host with a 400 Error', async () => {
      const app = await listeningApp()

      const response = parseRawResponse(await rawExchange(app, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n'))

      expect(response.status).toBe(400)
      expect(response.body).toEqual({ error: 400, message: 'HTTP/1.1 requests need a Host header' })
      expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
    })

    it('answers headers that do not arrive within the headers timeout with a 408 Error', async () => {
      const app = await buildTestApp({ config: { timeouts: { headersMs: 300, requestMs: 600, keepAliveMs: 1000 } } })
      await app.listen({ port: 0, host: '127.0.0.1' })
      const started = performance.now()

      const response = parseRawResponse(await exchangeOn(openSocket(app), 'GET /healthz HTTP/1.1\r\nHost: x\r\n'))

      expect(response.status).toBe(408)
      expect(response.body).toEqual({ error: 408, message: 'the request was not received in time' })
      expect(performance.now() - started).toBeLessThan(3000)
    })

    it('answers oversized headers with a 431 Error', async () => {
      const app = await listeningApp()

      const raw = await rawExchange(app, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)
      const response = parseRawResponse(raw)

      expect(response.status).toBe(431)
      expect(response.body).toEqual({ error: 431, message: 'the request headers are too large' })
      expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
    })

    it('answers a chunked body over the limit with a 413 Error', async () => {
      const app = await listeningApp()
      const chunk = 'x'.repeat(9000)
      const body = `{"id":1,"name":"${chunk}${chunk}"}`
      const chunked = [body.slice(0, 9000), body.slice(9000)]
        .map((part) => `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`).join('') + '0\r\n\r\n'

      const raw = await rawExchange(app, 'POST /plants HTTP/1.1\r\nHost: x\r\nConnection: close\r\n' +
        `Authorization: ${bearer().authorization}\r\nContent-Type: application/json\r\n` +
        `Transfer-Encoding: chunked\r\n\r\n${chunked}`)
      const response = parseRawResponse(raw)

      expect(response.status).toBe(413)
      expect(response.body).toEqual({ error: 413, message: 'request body is larger than 16384 bytes' })
    })
  })

  describe('while shutting down', () => {
    // Node 26's server.close() counts a connection whose request has not fully arrived as idle and closes
    // it; earlier versions let the request arrive, and the service answers it with a 503.
    const closesHalfSentRequests = Number(process.versions.node.split('.')[0]) >= 26

    it(closesHalfSentRequests
      ? 'finishes the request in flight and closes, unanswered, a connection still sending its request'
      : 'finishes the request in flight and answers a request that arrives meanwhile with a 503 Error', async () => {
      let openGate = () => {}
      const gate = new Promise<void>((resolve) => { openGate = resolve })
      const memory = openMemoryStore()
      let enterCreate = () => {}
      const inCreate = new Promise<void>((resolve) => { enterCreate = resolve })
      const store: PlantStore = { ...memory, create: async (plant) => { enterCreate(); await gate; return memory.create(plant) } }
      const app = await listeningApp(store)
      const body = '{"id":1,"name":"a"}'
      const post = 'POST /plants HTTP/1.1\r\nHost: x\r\nConnection: close\r\n' +
        `Authorization: ${bearer().authorization}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}`
      const inFlight = rawExchange(app, post)
      const late = openSocket(app)
      let lateBytes = ''
      late.on('data', (chunk) => { lateBytes += chunk.toString() })
      late.on('error', () => {})
      late.write('GET /healthz HTTP/1.1\r\n')
      await inCreate

      const closed = app.close()
      await expect.poll(() => app.server.listening).toBe(false)
      if (closesHalfSentRequests) {
        await expect.poll(() => late.destroyed).toBe(true)
        openGate()
        expect(parseRawResponse(await inFlight)).toMatchObject({ status: 200, body: { name: 'a' } })
        await closed
        expect(lateBytes).toBe('')
        return
      }
      const lateAnswer = exchangeOn(late, 'Host: x\r\n\r\n')
      await expect.poll(() => lateBytes).not.toBe('')
      openGate()

      const finished = parseRawResponse(await inFlight)
      const refused = parseRawResponse(await lateAnswer)
      await closed
      expect(finished.status).toBe(200)
      expect(finished.body).toEqual({ name: 'a' })
      expect(refused.status).toBe(503)
      expect(refused.body).toEqual({ error: 503, message: `the service is shutting down, retry later; request id ${refused.headers['x-request-id']}` })
      expect(refused.headers['retry-after']).toBe('1')
      expect(refused.headers.connection).toBe('close')
      expect(refused.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
    })
  })
})
