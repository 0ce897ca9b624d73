import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import autocannon from 'autocannon'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { bearer, buildTestApp, postPlant, temporaryFolder } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'

function portOf (app: FastifyInstance): number {
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('not listening')
  return address.port
}

async function timedGet (url: string, headers: Record<string, string> = {}) {
  const started = performance.now()
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) })
  await response.arrayBuffer()
  return { status: response.status, ms: performance.now() - started }
}

/** Polls until the service answers 200, for at most 5 s; reports when it did and how long that request took. */
async function firstSuccess (url: string, headers: Record<string, string>) {
  const started = performance.now()
  let last = await timedGet(url, headers)
  while (last.status !== 200 && performance.now() - started < 5000) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    last = await timedGet(url, headers)
  }
  return { ...last, recoveredAfterMs: performance.now() - started }
}

describe('Per-token rate limiting', () => {
  it('answers the noisy token 429 with Retry-After while another token is unaffected', async () => {
    const app = await buildTestApp({ tokens: ['noisy-token', 'quiet-token'], config: { rateLimitPerMinute: 5 } })
    const noisy = { authorization: 'Bearer noisy-token' }

    const allowed = []
    for (let index = 0; index < 5; index++) allowed.push((await postPlant(app, { id: index, name: 'n' }, noisy)).statusCode)
    const limited = await postPlant(app, { id: 99, name: 'n' }, noisy)
    const quiet = await postPlant(app, { id: 100, name: 'q' }, { authorization: 'Bearer quiet-token' })
    const limitedRead = await app.inject({ method: 'GET', url: '/plants/1', headers: noisy })

    expect(allowed).toEqual([200, 200, 200, 200, 200])
    expect(limited.statusCode).toBe(429)
    expect(limited.json()).toEqual({ error: 429, message: expect.stringMatching(/^too many requests for this token, retry in \d+ s$/) })
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0)
    expect(limitedRead.statusCode).toBe(429)
    expect(quiet.statusCode).toBe(200)
  })

  it('is off by default', async () => {
    const app = await buildTestApp()

    const statuses = []
    for (let index = 0; index < 30; index++) statuses.push((await app.inject({ method: 'GET', url: '/plants', headers: bearer() })).statusCode)

    expect(new Set(statuses)).toEqual(new Set([200]))
  })
})

describe('Overload', () => {
  it('sheds excess quickly with 503 and Retry-After, keeps accepted latency bounded and liveness up, and recovers', { timeout: 60_000 }, async () => {
    const token = 'overload-token'
    // About shedding, so both signals on (startServer turns them off): the event loop's at its default.
    const server = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'overload.db')}`, PLANTSTORE_TOKENS: token, SHED_IN_FLIGHT_REQUESTS: '100', SHED_EVENT_LOOP_DELAY_MS: '200' })
    let nextId = 0
    const liveness: number[] = []
    const probe = setInterval(() => { timedGet(`${server.baseUrl}/healthz`).then((result) => liveness.push(result.status), () => liveness.push(0)) }, 200)

    const result = await autocannon({
      url: server.baseUrl,
      connections: 800,
      duration: 4,
      requests: [{
        method: 'POST',
        path: '/plants',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        setupRequest: (request: autocannon.Request) => ({ ...request, body: `{"id":${nextId++},"name":"${'x'.repeat(200)}"}` })
      }]
    })
    clearInterval(probe)
    const afterwards = await firstSuccess(`${server.baseUrl}/plants?limit=1`, { authorization: `Bearer ${token}` })
    const shed = await fetch(`${server.baseUrl}/plants/1`, { headers: { authorization: `Bearer ${token}` } })

    const summary = JSON.stringify({ codes: result.statusCodeStats, p99: result.latency.p99, liveness, afterwards })
    expect(result.non2xx, summary).toBeGreaterThan(0)
    expect(result.statusCodeStats?.['503']?.count ?? 0).toBe(result.non2xx)
    expect(result.latency.p99, summary).toBeLessThan(3000)
    expect(liveness.length, summary).toBeGreaterThan(5)
    expect(liveness.every((status) => status === 200), summary).toBe(true)
    expect(afterwards.status, summary).toBe(200)
    // Requests still in flight from the flood may shed the first request or two after it.
    expect(afterwards.recoveredAfterMs, summary).toBeLessThan(1500)
    expect(afterwards.ms, summary).toBeLessThan(1000)
    expect([200, 404]).toContain(shed.status)
    expect(server.child.exitCode).toBeNull()
  })
})

describe('Load shedding, in the envelope', () => {
  it('answers with the Error body and Retry-After while the event loop lags, but never sheds /healthz', async () => {
    const app = await buildTestApp({ config: { maxEventLoopDelayMs: 20 } })
    await new Promise((resolve) => setTimeout(resolve, 2000))
    // Hold the event loop for 100 ms out of every ~110 ms, for a second: a lagging process.
    const lag = setInterval(() => { const until = Date.now() + 100; while (Date.now() < until) { /* busy */ } }, 10)
    await new Promise((resolve) => setTimeout(resolve, 1000))
    clearInterval(lag)

    const shed = await app.inject({ method: 'GET', url: '/plants', headers: bearer() })
    const live = await app.inject({ method: 'GET', url: '/healthz' })

    expect(shed.statusCode).toBe(503)
    expect(shed.json()).toEqual({ error: 503, message: `the service is overloaded, retry later; request id ${shed.headers['x-request-id']}` })
    expect(shed.headers['retry-after']).toBe('1')
    expect(live.statusCode).toBe(200)
  })
})

/** Sends a POST's headers and owes its body: a request in flight for as long as the socket stays open. */
function holdSlot (port: number): Socket {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  socket.write(`POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer().authorization}\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n`)
  return socket
}

describe('Load shedding on requests in flight', () => {
  it('sheds beyond the limit, never /healthz, and admits again as soon as one finishes or its client leaves', async () => {
    const app = await buildTestApp({ config: { maxInFlightRequests: 2 } })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = portOf(app)
    const holders = [holdSlot(port), holdSlot(port)]
    onTestFinished(() => { for (const socket of holders) socket.destroy() })
    await new Promise((resolve) => setTimeout(resolve, 200))

    const shed = await fetch(`http://127.0.0.1:${port}/plants`, { headers: bearer() })
    const shedBody = await shed.json()
    const live = await fetch(`http://127.0.0.1:${port}/healthz`)
    const liveWithQuery = await fetch(`http://127.0.0.1:${port}/healthz?probe=1`)
    holders[0]?.destroy()
    await new Promise((resolve) => setTimeout(resolve, 200))
    const admitted = await fetch(`http://127.0.0.1:${port}/plants`, { headers: bearer() })

    expect(shed.status).toBe(503)
    expect(shed.headers.get('retry-after')).toBe('1')
    expect(shedBody).toEqual({ error: 503, message: `the service is overloaded, retry later; request id ${shed.headers.get('x-request-id')}` })
    expect(live.status).toBe(200)
    expect(liveWithQuery.status).toBe(200)
    expect(admitted.status).toBe(200)
  })
})

describe('Load shedding on requests in flight, with pipelining', () => {
  it('frees the slots of pipelined requests whose client hung up before their answers went out', async () => {
    const app = await buildTestApp({ config: { maxInFlightRequests: 8 } })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = portOf(app)
    const pipelined = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' + 'GET /plants/1 HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(30)

    // Node answers pipelined requests one after another; the answers queued behind the first are never
    // written when the client goes away, and their responses never emit 'close'.
    for (let round = 0; round < 4; round++) {
      await Promise.all([0, 1, 2, 3].map(() => new Promise((resolve) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.write(pipelined)
          setTimeout(() => { socket.destroy(); resolve(undefined) }, 5)
        })
        socket.on('error', () => {})
      })))
    }
    await new Promise((resolve) => setTimeout(resolve, 300))
    // Seven of the eight slots held by requests whose body is still owed: the eighth must be free.
    const holders = Array.from({ length: 7 }, () => holdSlot(port))
    onTestFinished(() => { for (const socket of holders) socket.destroy() })
    await new Promise((resolve) => setTimeout(resolve, 200))
    const lastSlot = await fetch(`http://127.0.0.1:${port}/plants`, { headers: bearer() })
    holders.push(holdSlot(port))
    await new Promise((resolve) => setTimeout(resolve, 200))
    const beyondTheCap = await fetch(`http://127.0.0.1:${port}/plants`, { headers: bearer() })

    expect(lastSlot.status).toBe(200)
    expect(beyondTheCap.status).toBe(503)
  })
})

describe('Slow clients', () => {
  it('slowloris connections do not starve normal clients and are cut at the headers timeout with 408', { timeout: 30_000 }, async () => {
    const app = await buildTestApp({ store: openSqliteStore(join(temporaryFolder(), 'slow.db')), config: { timeouts: { headersMs: 1500, requestMs: 3000, keepAliveMs: 5000 } } })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = portOf(app)
    const slow: Socket[] = []
    const slowAnswers: string[] = []
    for (let index = 0; index < 300; index++) {
      const socket = connect(port, '127.0.0.1')
      socket.on('data', (chunk) => { slowAnswers.push(chunk.toString()) })
      socket.on('error', () => {})
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ')
      slow.push(socket)
    }
    onTestFinished(() => { for (const socket of slow) socket.destroy() })
    const drip = setInterval(() => { for (const socket of slow) if (!socket.destroyed) socket.write('a') }, 200)

    const normal = []
    for (let index = 0; index < 10; index++) {
      normal.push(await timedGet(`http://127.0.0.1:${port}/plants?limit=5`, bearer()))
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await new Promise((resolve) => setTimeout(resolve, 2500))
    clearInterval(drip)

    expect(normal.map((result) => result.status)).toEqual(Array(10).fill(200))
    expect(Math.max(...normal.map((result) => result.ms))).toBeLessThan(500)
    expect(slowAnswers.length).toBeGreaterThan(250)
    expect(slowAnswers.every((answer) => answer.startsWith('HTTP/1.1 408 '))).toBe(true)
  })
})
