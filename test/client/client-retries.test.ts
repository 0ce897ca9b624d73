import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { Plantstore, PlantstoreError, type PlantstoreOptions } from '../../clients/typescript/src/index.js'
import { retryAfterSeconds } from '../../clients/typescript/src/retry-policy.js'
import { listenOnLoopback, serverOfWholeRequests } from '../helpers/test-servers.js'

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage['headers']
  readonly body: string
}

type Reply = (response: ServerResponse, request: IncomingMessage) => void

const answer = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => (response) => {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'x-request-id': `req-${status}`, ...headers })
  response.end(body === undefined ? undefined : JSON.stringify(body))
}
const unavailable = (retryAfter?: string): Reply => answer(503, { error: 503, message: 'the store is unavailable; try again' }, retryAfter === undefined ? {} : { 'retry-after': retryAfter })
const dropped: Reply = (_response, request) => { request.socket.destroy() }
const plant = answer(200, { id: 1, name: 'Fern' })

/**
 * A real HTTP server that gives the replies in order, one a request (the last one again once they run
 * out), and records what it was sent; a client with fast backoff points at it.
 */
async function scriptedService (replies: readonly Reply[], options: Partial<PlantstoreOptions> = {}) {
  const seen: Seen[] = []
  const server = serverOfWholeRequests((request, body, response) => {
    seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: body.toString() })
    const reply = replies[Math.min(seen.length, replies.length) - 1]!
    reply(response, request)
  })
  const port = await listenOnLoopback(server, () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const ps = new Plantstore({ baseUrl: `http://127.0.0.1:${port}`, token: 'pst_test', retryDelay: { initialMs: 10, maxMs: 5000 }, ...options })
  return { ps, seen }
}

async function rejectionOf (promise: Promise<unknown>): Promise<PlantstoreError> {
  const error = await promise.then(() => undefined, (reason: unknown) => reason)
  expect(error).toBeInstanceOf(PlantstoreError)
  return error as PlantstoreError
}

describe('Retries', () => {
  it('given a service that answers 503 with Retry-After: 1 twice, waits a second each time, then resolves', async () => {
    const { ps, seen } = await scriptedService([unavailable('1'), unavailable('1'), answer(200, { id: 5, name: 'Fern' }, { etag: '"v1"' })])
    const started = performance.now()
    expect(await ps.plants.get(5)).toEqual({ plant: { id: 5n, name: 'Fern' }, etag: '"v1"' })
    expect(performance.now() - started).toBeGreaterThanOrEqual(1990)
    expect(seen.map((request) => `${request.method} ${request.url}`)).toEqual(['GET /plants/5', 'GET /plants/5', 'GET /plants/5'])
    expect(seen[0]?.headers.authorization).toBe('Bearer pst_test')
  })

  it('retries every call that is safe to repeat, after a 429, a 503 or a dropped connection', async () => {
    const calls: Array<[string, (ps: Plantstore) => Promise<unknown>]> = [
      ['POST /plants', (ps) => ps.plants.create({ id: 1n, name: 'Fern' })],
      ['PUT /plants/1', (ps) => ps.plants.replace(1n, { name: 'Fern' })],
      ['DELETE /plants/1', (ps) => ps.plants.delete(1n)],
      ['PATCH /plants/1', (ps) => ps.plants.update(1n, { tag: null }, { ifMatch: '"v1"' })],
      ['HEAD /plants?tag=a&limit=1', (ps) => ps.plants.count({ tag: 'a' })],
      ['POST /plants/batch', (ps) => ps.plants.batch([{ method: 'POST', body: { id: 1, name: 'a' } }, { method: 'DELETE', id: 2, ifMatch: '"v2"' }])]
    ]
    for (const [request, call] of calls) {
      const success = request.startsWith('HEAD')
        ? answer(200, undefined, { 'x-total-count': '7' })
        : request.includes('batch') ? answer(200, { results: [] }) : answer(200, { id: 1, name: 'Fern' })
      const { ps, seen } = await scriptedService([answer(429, { error: 429, message: 'slow down' }, { 'retry-after': '0' }), dropped, unavailable(), success])
      await call(ps)
      expect(seen.map((sent) => `${sent.method} ${sent.url}`), request).toEqual(Array(4).fill(request))
    }
  })

  it('sends a PATCH without ifMatch, or a batch with a non-POST operation without one, only once', async () => {
    for (const call of [
      (ps: Plantstore) => ps.plants.update(1n, { tag: null }),
      (ps: Plantstore) => ps.plants.batch([{ method: 'PUT', id: 1, body: { name: 'a' } }])
    ]) {
      const { ps, seen } = await scriptedService([unavailable('0'), answer(200, { id: 1, name: 'a' })])
      const error = await rejectionOf(call(ps))
      expect([error.status, error.retryAfter, seen.length]).toEqual([503, 0, 1])
    }
    const { ps, seen } = await scriptedService([dropped, answer(200, { id: 1, name: 'a' })])
    expect((await rejectionOf(ps.plants.update(1n, { name: 'a' }))).status).toBe(0)
    expect(seen).toHaveLength(1)
  })

  it('never retries another 4xx, and gives up after `retries` further attempts', async () => {
    for (const status of [400, 401, 403, 404, 409, 412]) {
      const { ps, seen } = await scriptedService([answer(status, { error: status, message: `status ${status}` }), plant])
      expect((await rejectionOf(ps.plants.get(1))).status).toBe(status)
      expect(seen).toHaveLength(1)
    }
    const three = await scriptedService([unavailable('0')])
    const error = await rejectionOf(three.ps.plants.get(1))
    expect([error.status, error.message, error.requestId, three.seen.length]).toEqual([503, 'the store is unavailable; try again', 'req-503', 4])
    const none = await scriptedService([unavailable('0')], { retries: 0 })
    await rejectionOf(none.ps.plants.get(1))
    expect(none.seen).toHaveLength(1)
  })

  it('does not wait out a Retry-After longer than retryDelay.maxMs: the error carries it at once', async () => {
    const { ps, seen } = await scriptedService([unavailable('120'), plant])
    const started = performance.now()
    const error = await rejectionOf(ps.plants.get(1))
    expect([error.status, error.retryAfter, seen.length]).toEqual([503, 120, 1])
    expect(performance.now() - started).toBeLessThan(1000)
  })

  it('stops waiting when the call\'s signal aborts, rejecting with its reason', async () => {
    const { ps } = await scriptedService([unavailable('3'), plant])
    const controller = new AbortController()
    setTimeout(() => controller.abort(new Error('enough')), 100)
    const started = performance.now()
    await expect(ps.plants.get(1, { signal: controller.signal })).rejects.toThrow('enough')
    expect(performance.now() - started).toBeLessThan(1500)
  })

  it('reports no answer as status 0 with the network\'s error as the cause, after the retries', async () => {
    const closed = createServer()
    const port = await listenOnLoopback(closed)
    await new Promise((resolve) => closed.close(resolve))
    const ps = new Plantstore({ baseUrl: `http://127.0.0.1:${port}`, token: 't', retries: 2, retryDelay: { initialMs: 5 } })
    const error = await rejectionOf(ps.plants.get(1))
    expect({ status: error.status, error: error.error, requestId: error.requestId }).toEqual({ status: 0, error: 0, requestId: undefined })
    expect(error.message).toMatch(new RegExp(`^GET http://127.0.0.1:${port}/plants/1 got no answer: .*ECONNREFUSED`))
    expect(error.cause).toBeInstanceOf(Error)
  })

  it('makes an error of an answer without the Error body from its status', async () => {
    const { ps } = await scriptedService([(response) => { response.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad Gateway</h1>') }])
    const error = await rejectionOf(ps.plants.get(1))
    expect([error.status, error.error, error.message]).toEqual([502, 502, 'GET /plants/1 answered 502 Bad Gateway'])
  })
})

describe('Retry-After', () => {
  it('reads delay-seconds and an HTTP-date, in seconds from now', () => {
    const now = Date.parse('2026-11-27T12:00:00Z')
    expect(retryAfterSeconds('7', now)).toBe(7)
    expect(retryAfterSeconds('Fri, 27 Nov 2026 12:00:30 GMT', now)).toBe(30)
    expect(retryAfterSeconds('Fri, 27 Nov 2026 11:00:00 GMT', now)).toBe(0)
    expect(retryAfterSeconds('soon', now)).toBeUndefined()
    expect(retryAfterSeconds(null, now)).toBeUndefined()
  })
})
