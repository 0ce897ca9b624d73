/**
 * What bounds a change stream, over real sockets on the memory store: the keep-alive comment, the 410
 * of a resume point past the retention, CHANGES_STREAMS_MAX, the end of a stream whose token is revoked
 * or expires, a client that does not read (cut) next to one that reads a large page (not cut), the
 * close of the app with many streams open, and streams that the client or the stop overtakes while
 * they are being prepared.
 */
import { request as httpRequest } from 'node:http'
import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { AppConfig } from '../../src/app.js'
import { DEFAULT_CHANGES_CONFIG } from '../../src/config.js'
import { KEEP_ALIVE_MS, TICK_MS } from '../../src/http/change-streams.js'
import type { ChangeFeedRequest } from '../../src/store/change-log.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { bearer, buildTestApp, TEST_TOKEN, type TestAppOptions } from '../helpers/app.js'
import { generateSigningKey, startIdentityProvider } from '../helpers/identity-provider.js'
import { jwtSettingsFor } from '../helpers/jwt-service.js'
import { claimsFor, nowSeconds } from '../helpers/jwt-tokens.js'
import { changeHead, openChangeStream, openLiveStream, putPlant, writeBatch } from '../helpers/change-streams.js'
import { collectingStream } from '../helpers/log-lines.js'
import { seqsOf, type EventStreamReader } from '../helpers/event-stream.js'

const ADMIN_TOKEN = 'change-streams-admin-token-7d21c0'
const FOLLOWER_TOKEN = 'change-streams-follower-token-41be9a'

/** The app on `store` (a fresh memory store by default), listening on 127.0.0.1: it and its base URL. */
async function listeningApp (options: TestAppOptions & { changes?: Partial<NonNullable<AppConfig['changes']>> } = {}): Promise<{ app: FastifyInstance, baseUrl: string }> {
  const { changes, ...rest } = options
  const app = await buildTestApp({
    ...rest,
    config: { ...rest.config, ...(changes === undefined ? {} : { changes: { ...DEFAULT_CHANGES_CONFIG, ...changes } }) }
  })
  return { app, baseUrl: await app.listen({ host: '127.0.0.1', port: 0 }) }
}

/** A counter's or gauge's value in the app's metrics, 0 when absent. */
async function metricValue (app: FastifyInstance, series: string): Promise<number> {
  const metrics = app.metrics
  if (metrics === null) throw new Error('metrics are off')
  const { text } = await metrics.scrape()
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

const closedStreams = (app: FastifyInstance, reason: string) => metricValue(app, `plantstore_change_streams_closed_total{reason="${reason}"}`)

/** How long after `fromMs` (performance.now()) the stream ended. */
async function endedWithin (stream: EventStreamReader, fromMs: number, limitMs: number): Promise<number> {
  const ending = await Promise.race([stream.ended, new Promise<undefined>((resolve) => { setTimeout(() => { resolve(undefined) }, limitMs + 3000) })])
  expect(ending, `the stream did not end; it received:\n${stream.text()}`).toBeDefined()
  const afterMs = (ending?.atMs ?? Infinity) - fromMs
  expect(afterMs).toBeLessThanOrEqual(limitMs)
  return afterMs
}

/** A long name (256 code points, 3 bytes each in UTF-8): events of about 0.9 KB, to fill buffers fast. */
const longName = (seed: number) => `${seed}`.padEnd(256, '葉')

const range = (from: number, count: number) => Array.from({ length: count }, (_, index) => from + index)

/** A memory store whose change-log reads wait, while `hold` is on, until `release`; `reading` resolves at the first read held. */
function storeWithHeldReads () {
  const store: PlantStore = openMemoryStore()
  const read = store.changes.read.bind(store.changes)
  let gate: Promise<void> | undefined
  let release = () => {}
  let announce = () => {}
  const reading = new Promise<void>((resolve) => { announce = resolve })
  store.changes.read = async (request: ChangeFeedRequest) => {
    if (gate !== undefined) {
      announce()
      await gate
    }
    return read(request)
  }
  return {
    store,
    reading,
    hold () { gate = new Promise((resolve) => { release = resolve }) },
    release () {
      gate = undefined
      release()
    }
  }
}

/** Resolves once the server holds no connection. */
async function untilNoConnections (app: FastifyInstance): Promise<void> {
  await expect.poll(() => new Promise<number>((resolve, reject) => {
    app.server.getConnections((error, count) => { if (error === null) resolve(count); else reject(error) })
  }), { timeout: 5000, interval: 20 }).toBe(0)
}

/** Sends a stream's request on a raw socket and resolves once its head and `retry:` line have arrived. */
async function rawStream (port: number, query = ''): Promise<{ socket: Socket, received: () => string, closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1')
  onTestFinished(() => { socket.destroy() })
  const closed = new Promise<void>((resolve) => { socket.once('close', () => { resolve() }) })
  let text = ''
  socket.on('data', (chunk: Buffer) => { text += chunk.toString('latin1') })
  socket.on('error', () => {})
  socket.write(`GET /plants/changes${query} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${TEST_TOKEN}\r\n\r\n`)
  await expect.poll(() => text, { timeout: 10_000, interval: 10 }).toContain('retry: 2000')
  return { socket, received: () => text, closed }
}

describe('Change streams: keep-alive, retention, limits, tokens, slow clients and the stop', () => {
  it('given an idle stream, then a comment line arrives each keep-alive interval; and the default interval with the tick is at most 15 s', async () => {
    expect(KEEP_ALIVE_MS + TICK_MS).toBeLessThanOrEqual(15_000)
    const { baseUrl } = await listeningApp({ changes: { keepAliveMs: 300 } })

    const stream = await openLiveStream(baseUrl)

    await stream.waitFor('two comment lines', () => stream.parser.comments.length >= 2, 5000)
    expect(stream.text()).toMatch(/^retry: 2000\n\n(: keep-alive\n\n)+$/)
    expect(stream.events).toEqual([])
  })

  it('given a resume point whose next changes are past the retention and pruned, then the stream is a 410 before anything is sent, from Last-Event-ID or after', async () => {
    const store = openMemoryStore()
    const { app, baseUrl } = await listeningApp({ store, changes: { retentionMs: 200 } })
    await putPlant(app, 1, { name: 'Soon forgotten' })
    await putPlant(app, 1, { name: 'Soon forgotten too' })
    await expect.poll(async () => (await store.changes.extent()).kept, { timeout: 10_000, interval: 100 }).toBe(0)
    const head = await changeHead(app)

    for (const [query, headers] of [['', { 'last-event-id': '0' }], ['?after=0', {}], [`?after=${head}`, { 'last-event-id': '1' }]] as const) {
      const stream = await openChangeStream(baseUrl, query, headers)
      const body = await stream.body()
      expect({ status: stream.status, type: stream.headers['content-type'] }).toEqual({ status: 410, type: 'application/json; charset=utf-8' })
      expect(JSON.parse(body)).toEqual({ error: 410, message: expect.stringMatching(/^changes after seq \d+ are no longer kept \(CHANGES_RETENTION\): read the plants again/) })
      expect(body).not.toContain('retry:')
    }
    // Nothing after the head is lost: resuming there is a stream.
    const resumed = await openLiveStream(baseUrl, '', { 'last-event-id': String(head) })
    await putPlant(app, 2, { name: 'Kept' })
    expect(seqsOf(await resumed.waitForEvents(1))).toEqual([head + 1])
  })

  it('given a follower whose next changes are pruned before it reads them, then its streams end (to resume and hear the 410), and the next stream is fed', async () => {
    const held = storeWithHeldReads()
    const { app, baseUrl } = await listeningApp({ store: held.store, changes: { retentionMs: 200 }, config: { metrics: true } })
    const stream = await openLiveStream(baseUrl)
    held.hold()
    await putPlant(app, 1, { name: 'Pruned before the follower reads it' })
    await held.reading
    await expect.poll(async () => (await held.store.changes.extent()).kept, { timeout: 10_000, interval: 100 }).toBe(0)

    held.release()

    await endedWithin(stream, performance.now(), 2000)
    expect(await closedStreams(app, 'expired')).toBe(1)
    const next = await openLiveStream(baseUrl)
    await putPlant(app, 2, { name: 'After the prune' })
    expect((await next.waitForEvents(1, 5000)).map((event) => JSON.parse(event.data).id)).toEqual([2])
  })

  it('given a malformed Last-Event-ID, then the answer is a 400 before any stream, and no slot is taken', async () => {
    const { baseUrl } = await listeningApp({ changes: { streamsMax: 1 } })

    for (const lastEventId of ['-1', '01', '1.0', '9223372036854775808', 'x']) {
      const refused = await openChangeStream(baseUrl, '', { 'last-event-id': lastEventId })
      const body = await refused.body()
      expect({ lastEventId, status: refused.status, type: refused.headers['content-type'] })
        .toEqual({ lastEventId, status: 400, type: 'application/json; charset=utf-8' })
      expect(JSON.parse(body)).toMatchObject({ error: 400 })
    }
    await openLiveStream(baseUrl, '', { 'last-event-id': '9223372036854775807' })
  })

  it('given HEAD asking for the event stream, then the answer is the stream\'s head at once, and no stream is opened', async () => {
    const { app, baseUrl } = await listeningApp({ changes: { streamsMax: 1 }, config: { metrics: true } })

    const answer = await new Promise<{ status: number, type: string | undefined, cacheControl: string | undefined, body: string }>((resolve, reject) => {
      const request = httpRequest(`${baseUrl}/plants/changes`, { method: 'HEAD', agent: false, headers: { accept: 'text/event-stream', ...bearer() } }, (response) => {
        let body = ''
        response.on('data', (chunk: Buffer) => { body += chunk.toString() })
        response.on('end', () => {
          resolve({ status: response.statusCode ?? 0, type: response.headers['content-type'], cacheControl: response.headers['cache-control'], body })
        })
      })
      request.setTimeout(5000, () => { request.destroy(new Error('no answer to HEAD within 5 s')) })
      request.on('error', reject)
      request.end()
    })

    expect(answer).toEqual({ status: 200, type: 'text/event-stream; charset=utf-8', cacheControl: 'no-store', body: '' })
    expect(await metricValue(app, 'plantstore_change_streams_open')).toBe(0)
    await openLiveStream(baseUrl)
  })

  it('given CHANGES_STREAMS_MAX streams open, when one more opens, then it is a 503 with Retry-After, and once a stream closes a new one opens', async () => {
    const { baseUrl } = await listeningApp({ changes: { streamsMax: 2 } })
    const first = await openLiveStream(baseUrl)
    await openLiveStream(baseUrl, '?type=plant.deleted')

    const refused = await openChangeStream(baseUrl)
    const body = await refused.body()
    expect({ status: refused.status, retryAfter: refused.headers['retry-after'], type: refused.headers['content-type'] })
      .toEqual({ status: 503, retryAfter: '5', type: 'application/json; charset=utf-8' })
    expect(JSON.parse(body)).toEqual({ error: 503, message: expect.stringContaining('CHANGES_STREAMS_MAX') })

    first.close()
    await expect.poll(async () => {
      const next = await openChangeStream(baseUrl)
      if (next.status !== 200) await next.body()
      return next.status
    }, { timeout: 2000, interval: 50 }).toBe(200)
  })

  it('given a stream opened with a stored token, when the token is revoked, then the stream ends within 2 s, counted as a token close', async () => {
    const { app, baseUrl } = await listeningApp({ tokens: [TEST_TOKEN, `name=ops;scopes=admin;${ADMIN_TOKEN}`], config: { metrics: true } })
    const created = await app.inject({
      method: 'POST', url: '/admin/tokens', headers: { ...bearer(ADMIN_TOKEN), 'content-type': 'application/json' }, payload: { name: 'follower', scopes: ['plants:read'] }
    })
    expect(created.statusCode, created.body).toBe(201)
    const { id, token } = created.json() as { id: string, token: string }
    const stream = await openLiveStream(baseUrl, '', bearer(token))
    await putPlant(app, 10, { name: 'Seen before the revocation' })
    await stream.waitForEvents(1)

    const revoked = await app.inject({ method: 'DELETE', url: `/admin/tokens/${id}`, headers: bearer(ADMIN_TOKEN) })
    expect(revoked.statusCode).toBe(204)
    const revokedAt = performance.now()

    await endedWithin(stream, revokedAt, 2000)
    expect(await closedStreams(app, 'token')).toBe(1)
    expect((await openChangeStream(baseUrl, '', bearer(token))).status).toBe(401)
  })

  it('given streams that end, then each gets its one request line as it ends: URL, 200, the token, the events it sent and why it ended', async () => {
    const log = collectingStream()
    const { app, baseUrl } = await listeningApp({
      tokens: [TEST_TOKEN, `name=follower;scopes=plants:read;${FOLLOWER_TOKEN}`], logStream: log.stream, config: { logLevel: 'info' }
    })
    const streamLines = () => log.lines().filter((line) => line.msg === 'request completed' && String(line.url).startsWith('/plants/changes'))
    const leaving = await openLiveStream(baseUrl, '?type=plant.created', bearer(FOLLOWER_TOKEN))
    const staying = await openLiveStream(baseUrl, '', bearer(FOLLOWER_TOKEN))
    await putPlant(app, 1, { name: 'One' })
    await putPlant(app, 2, { name: 'Two' })
    await putPlant(app, 1, { name: 'One again' })
    await leaving.waitForEvents(2)
    await staying.waitForEvents(3)
    expect(streamLines()).toEqual([])

    leaving.close()
    await expect.poll(() => streamLines().length, { timeout: 2000, interval: 20 }).toBe(1)
    await app.close()
    await staying.ended

    const lines = streamLines()
    expect(lines.map(({ method, url, statusCode, tokenName, events, streamEnd }) => ({ method, url, statusCode, tokenName, events, streamEnd }))).toEqual([
      { method: 'GET', url: '/plants/changes?type=plant.created', statusCode: 200, tokenName: 'follower', events: 2, streamEnd: 'client' },
      { method: 'GET', url: '/plants/changes', statusCode: 200, tokenName: 'follower', events: 3, streamEnd: 'shutdown' }
    ])
    for (const line of lines) expect(line.responseTime).toBeGreaterThan(0)
  })

  it('given a stream opened with a token expiring in 2 s, then the stream ends within 2 s of the expiry, not before', async () => {
    const { app, baseUrl } = await listeningApp({ tokens: [TEST_TOKEN, `name=ops;scopes=admin;${ADMIN_TOKEN}`] })
    const expiresAt = new Date(Date.now() + 2000)
    const created = await app.inject({
      method: 'POST',
      url: '/admin/tokens',
      headers: { ...bearer(ADMIN_TOKEN), 'content-type': 'application/json' },
      payload: { name: 'short-lived', scopes: ['plants:read'], expiresAt: expiresAt.toISOString() }
    })
    expect(created.statusCode, created.body).toBe(201)
    const { token } = created.json() as { token: string }

    const stream = await openLiveStream(baseUrl, '', bearer(token))

    const ending = await stream.ended
    const afterExpiryMs = ending.wallMs - expiresAt.getTime()
    expect(afterExpiryMs).toBeGreaterThanOrEqual(0)
    expect(afterExpiryMs).toBeLessThanOrEqual(2000)
  })

  it('given a stream opened with an identity provider\'s token, then the stream ends within 2 s of its exp plus the clock tolerance, not before', async () => {
    const provider = await startIdentityProvider({ keys: [await generateSigningKey('ES256', 'stream-expiry-ec')] })
    onTestFinished(() => provider.close())
    const toleranceS = 1
    const { baseUrl } = await listeningApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider, { clockToleranceS: toleranceS })) })
    const exp = nowSeconds() + 3
    const token = await provider.sign(claimsFor(provider, { scope: 'plants:read', exp }))

    const stream = await openLiveStream(baseUrl, '', bearer(token))

    const ending = await stream.ended
    const afterRefusalMs = ending.wallMs - (exp + toleranceS) * 1000
    expect(afterRefusalMs).toBeGreaterThanOrEqual(0)
    expect(afterRefusalMs).toBeLessThanOrEqual(2000)
  })

  it('given clients that read, when a batch writes 1000 changes with long names (a page well past the 128 KiB bound), then live and catching-up streams get all of them and none is cut', async () => {
    const { app, baseUrl } = await listeningApp({ config: { metrics: true, batchBodyLimit: 4 * 1024 * 1024 } })
    const start = await changeHead(app)
    const live = await openLiveStream(baseUrl)

    for (const round of [0, 1]) await writeBatch(app, range(1, 1000).map((id) => ({ method: 'PUT', id, body: { name: longName(id + round) } })))
    const catchingUp = await openLiveStream(baseUrl, `?after=${start}`)

    for (const stream of [live, catchingUp]) {
      await stream.waitForEvents(2000, 20_000)
      expect(seqsOf(stream.events)).toEqual(range(start + 1, 2000))
      expect(stream.hasEnded()).toBe(false)
    }
    expect(await closedStreams(app, 'slow_client')).toBe(0)
  })

  it('given a client that stops reading, when changes go on, then the server cuts its connection, counts a slow_client close, the client gets no more than it could buffer, and the next stream is fed', async () => {
    const { app, baseUrl } = await listeningApp({ config: { metrics: true, batchBodyLimit: 4 * 1024 * 1024 } })
    const { socket, received, closed } = await rawStream(Number(new URL(baseUrl).port))
    socket.pause()

    let batches = 0
    while (await closedStreams(app, 'slow_client') === 0) {
      expect(batches, 'the non-reading client was not cut after 40 MB of events').toBeLessThan(40)
      await writeBatch(app, range(1, 1000).map((id) => ({ method: 'PUT', id, body: { name: longName(id + batches) } })))
      batches++
      await new Promise((resolve) => { setTimeout(resolve, 20) })
    }
    expect(await metricValue(app, 'plantstore_change_streams_open')).toBe(0)

    // The client reads again: it gets what the kernel and the server had buffered, then the connection's end.
    socket.resume()
    await closed
    const eventsReceived = received().split('\nevent: ').length - 1
    expect(eventsReceived).toBeLessThan(batches * 1000)

    // The cut stream was the only one: the next stream is fed as usual.
    const next = await openLiveStream(baseUrl)
    await putPlant(app, 5000, { name: 'After the cut' })
    expect((await next.waitForEvents(1, 5000)).map((event) => JSON.parse(event.data).id)).toEqual([5000])
  })

  it('given 200 open streams, when the app closes, then close resolves within 2 s and every client sees its stream end', async () => {
    const { app, baseUrl } = await listeningApp()
    const streams: EventStreamReader[] = []
    for (let group = 0; group < 4; group++) {
      streams.push(...await Promise.all(range(0, 50).map(() => openLiveStream(baseUrl))))
    }

    const closing = performance.now()
    await app.close()
    const closedAfterMs = performance.now() - closing

    expect(closedAfterMs).toBeLessThan(2000)
    const endings = await Promise.all(streams.map((stream) => endedWithin(stream, closing, 2000)))
    expect(endings).toHaveLength(200)
    expect(streams.filter((stream) => !stream.text().startsWith('retry: 2000\n\n'))).toEqual([])
  })

  it('given a client that leaves while its stream is being prepared, then its slot is free for the next stream', async () => {
    const held = storeWithHeldReads()
    const { app, baseUrl } = await listeningApp({ store: held.store, changes: { streamsMax: 1 } })
    await putPlant(app, 1, { name: 'A backlog to read' })
    held.hold()
    const leaving = connect(Number(new URL(baseUrl).port), '127.0.0.1')
    leaving.write(`GET /plants/changes?after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${TEST_TOKEN}\r\n\r\n`)
    await held.reading

    leaving.destroy()
    await untilNoConnections(app)
    held.release()

    await expect.poll(async () => {
      const next = await openChangeStream(baseUrl)
      if (next.status !== 200) await next.body()
      else next.close()
      return next.status
    }, { timeout: 2000, interval: 100 }).toBe(200)
  })

  it('given a stream being prepared when the app closes, then it ends at once and the close does not wait for it', async () => {
    const held = storeWithHeldReads()
    const { app, baseUrl } = await listeningApp({ store: held.store })
    await putPlant(app, 1, { name: 'A backlog to read' })
    held.hold()
    const opening = openChangeStream(baseUrl, '?after=0')
    await held.reading

    const closing = performance.now()
    const closed = app.close()
    setTimeout(() => { held.release() }, 100)
    const stream = await opening
    await closed
    expect(performance.now() - closing).toBeLessThan(2000)
    await endedWithin(stream, closing, 2000)
  })
})
