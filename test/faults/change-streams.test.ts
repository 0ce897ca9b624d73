/**
 * Change streams under faults: the service process stopping (SIGTERM) with CHANGES_STREAMS_MAX streams
 * open and a client holding a half-sent request, and PostgreSQL cut away (through a TCP proxy) under an
 * open stream.
 */
import { connect } from 'node:net'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { DEFAULT_CHANGES_CONFIG } from '../../src/config.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { bearer, buildTestApp, TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { changeHead, feedAfter, openLiveStream, putPlant } from '../helpers/change-streams.js'
import { openEventStream, seqsOf, type EventStreamReader } from '../helpers/event-stream.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import { startTcpProxy } from '../helpers/tcp-proxy.js'

const TOKEN = 'change-streams-fault-token'
const STREAMS = 1000
/** server.ts's SHUTDOWN_DEADLINE_MS: past it the process exits 1. */
const SHUTDOWN_DEADLINE_MS = 8000

interface LogLine { readonly level: number, readonly msg: string, readonly [key: string]: unknown }

const logLines = (stdout: string): LogLine[] => stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as LogLine)

const range = (from: number, count: number) => Array.from({ length: count }, (_, index) => from + index)

describe('Change streams when the service stops', () => {
  it('given 1000 open streams and a client holding a half-sent request, when SIGTERM comes, then every stream ends at once and the process exits 0 within the 8 s deadline, "stopped" its last line', { timeout: 120_000 }, async () => {
    const server = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'streams.db')}`, PLANTSTORE_TOKENS: TOKEN })
    const streams: EventStreamReader[] = []
    for (let group = 0; group < STREAMS / 50; group++) {
      streams.push(...await Promise.all(range(0, 50).map(async () => {
        const stream = await openEventStream(`${server.baseUrl}/plants/changes`, { headers: { authorization: `Bearer ${TOKEN}` }, timeoutMs: 20_000 })
        expect(stream.status).toBe(200)
        return stream
      })))
    }
    const created = await fetch(`${server.baseUrl}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: '{"id":1,"name":"Seen by every stream"}'
    })
    expect(created.status).toBe(200)
    await Promise.all(streams.map((stream) => stream.waitForEvents(1, 20_000)))
    // Headers and half of the body: the server waits for the rest (up to its 30 s request timeout).
    const halfSent = connect(Number(new URL(server.baseUrl).port), '127.0.0.1')
    onTestFinished(() => { halfSent.destroy() })
    halfSent.on('error', () => {})
    halfSent.write(`POST /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{"id":2,`)
    await new Promise((resolve) => { setTimeout(resolve, 200) })

    const signalled = performance.now()
    process.kill(server.child.pid as number, 'SIGTERM')
    const code = await server.exited
    const stoppedAfterMs = performance.now() - signalled

    expect(code).toBe(0)
    expect(stoppedAfterMs).toBeLessThan(SHUTDOWN_DEADLINE_MS)
    const endings = await Promise.all(streams.map((stream) => stream.ended))
    const streamsEndedAfterMs = Math.max(...endings.map((ending) => ending.atMs - signalled))
    console.log(`SIGTERM with ${STREAMS} streams and a half-sent request: every stream ended within ${streamsEndedAfterMs.toFixed(0)} ms, the process exited 0 after ${stoppedAfterMs.toFixed(0)} ms`)
    expect(streamsEndedAfterMs).toBeLessThan(2000)
    expect(logLines(server.stdout()).at(-1)).toMatchObject({ level: 30, msg: 'stopped', signal: 'SIGTERM' })
    expect(server.stdout()).not.toMatch(/"level":(50|60)/)
  })
})

describe('Change streams while PostgreSQL cannot be reached', () => {
  it('given an open stream, when the database is cut away, then writes fail and the stream stays open; once it is back, the changes written after reach the stream, none lost', { timeout: 90_000 }, async () => {
    const databaseUrl = new URL(await createTestDatabase())
    const proxy = await startTcpProxy(Number(databaseUrl.port))
    onTestFinished(() => proxy.close())
    databaseUrl.port = String(proxy.port)
    const app = await buildTestApp({
      store: await openPostgresStore(databaseUrl.toString(), { ...TEST_POSTGRES_OPTIONS, connectTimeoutMs: 1000, statementTimeoutMs: 2000 }),
      config: { changes: { ...DEFAULT_CHANGES_CONFIG, keepAliveMs: 500 } }
    })
    const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })
    const start = await changeHead(app)
    const stream = await openLiveStream(baseUrl, `?after=${start}`)
    for (const id of range(1, 3)) await putPlant(app, id, { name: `before the outage ${id}` })
    await stream.waitForEvents(3)

    proxy.reset()
    const failedWrites = []
    for (const id of range(10, 3)) {
      const response = await app.inject({ method: 'PUT', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/json' }, payload: { name: 'during the outage' } })
      failedWrites.push(response.statusCode)
    }
    const commentsBefore = stream.parser.comments.length
    await stream.waitFor('keep-alive comments during the outage', () => stream.parser.comments.length >= commentsBefore + 2, 10_000)
    expect(failedWrites).toEqual([503, 503, 503])
    expect(stream.hasEnded()).toBe(false)

    proxy.pass()
    await expect.poll(async () => (await app.inject({
      method: 'PUT', url: '/plants/20', headers: { ...bearer(), 'content-type': 'application/json' }, payload: { name: 'the first write after the outage' }
    })).statusCode, { timeout: 30_000, interval: 250 }).toBeLessThan(300)
    for (const id of range(21, 5)) await putPlant(app, id, { name: `after the outage ${id}` })
    const head = await changeHead(app)

    await stream.waitFor(`the change of seq ${head}`, () => stream.events.at(-1)?.lastEventId === String(head), 10_000)
    const feed = await feedAfter(app, start)
    expect(seqsOf(stream.events)).toEqual(feed.map((change) => change.seq))
    expect(seqsOf(stream.events)).toEqual(range(start + 1, head - start))
    expect(stream.events.map((event) => event.data)).toEqual(feed.map((change) => change.text))
    expect(stream.hasEnded()).toBe(false)
  })
})
