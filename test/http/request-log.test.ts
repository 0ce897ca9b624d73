import { connect, type AddressInfo } from 'node:net'
import { hostname } from 'node:os'
import { Writable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { describe, expect, it } from 'vitest'
import type { AppConfig } from '../../src/app.js'
import { CompletedRequestLog } from '../../src/http/request-log.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import { bearer, buildTestApp, TEST_TOKEN } from '../helpers/app.js'

function collectingStream (): { stream: Writable, lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString())
      callback()
    }
  })
  return {
    stream,
    lines: () => chunks.join('').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>)
  }
}

const nextTurn = () => new Promise(setImmediate)

/** Sends raw bytes and resolves with everything the server answers until it closes the connection. */
function rawRequest (address: AddressInfo, request: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(address.port, address.address, () => socket.end(request))
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('close', () => { resolve(Buffer.concat(chunks).toString()) })
  })
}

describe('The log line of a completed request', () => {
  it('has the keys and the order of a pino line, with the request id, method, path, client address, status, time and the token\'s name', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' }, tokens: [`name=grafana.dashboard;${TEST_TOKEN}`] })

    await app.inject({ method: 'GET', url: '/plants/5?x=1', headers: { ...bearer(), 'x-request-id': 'line-1' } })
    app.log.info({ reqId: 'pino', method: 'GET', url: '/', remoteAddress: '127.0.0.1', statusCode: 200, responseTime: 1, tokenName: 'x' }, 'request completed')
    await nextTurn()

    const [pinoLine, completed] = [log.lines().find((line) => line.reqId === 'pino'), log.lines().find((line) => line.reqId === 'line-1')]
    expect(Object.keys(completed ?? {})).toEqual(Object.keys(pinoLine ?? {}))
    expect(completed).toEqual({
      level: 30,
      time: expect.any(Number),
      pid: process.pid,
      hostname: hostname(),
      reqId: 'line-1',
      method: 'GET',
      url: '/plants/5?x=1',
      remoteAddress: '127.0.0.1',
      statusCode: 404,
      responseTime: expect.any(Number),
      tokenName: 'grafana.dashboard',
      msg: 'request completed'
    })
    expect(Math.abs((completed?.time as number) - Date.now())).toBeLessThan(60_000)
  })

  it('has no token name when no token authenticated the request', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' } })

    await app.inject({ method: 'GET', url: '/plants/5', headers: { 'x-request-id': 'anonymous' } })
    await app.inject({ method: 'GET', url: '/plants/5', headers: { ...bearer('wrong-token-value'), 'x-request-id': 'wrong' } })
    await nextTurn()

    expect(log.lines().filter((line) => line.msg === 'request completed').map((line) => [line.reqId, line.statusCode, line.tokenName]))
      .toEqual([['anonymous', 401, undefined], ['wrong', 401, undefined]])
  })

  it('escapes the quotes and backslashes a request id and a path may hold', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' } })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const requestId = 'q"uote\\back'
    // Sent over a socket: inject would percent-encode the path, and Node's parser lets these through.
    const target = Buffer.from('/plants/"\\{|}^`?p="x"')

    const answer = await rawRequest(app.server.address() as AddressInfo, Buffer.concat([
      Buffer.from('GET '), target, Buffer.from(` HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer().authorization}\r\nx-request-id: ${requestId}\r\nConnection: close\r\n\r\n`)
    ]))
    await nextTurn()

    expect(answer).toMatch(/^HTTP\/1\.1 400 /)
    const line = log.lines().find((entry) => entry.reqId === requestId)
    expect(line).toMatchObject({ reqId: requestId, url: target.toString('latin1'), statusCode: 400 })
  })

  it('is one line per request, written however many requests complete in one event-loop turn', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' } })

    await Promise.all(Array.from({ length: 20 }, (_, index) =>
      app.inject({ method: 'GET', url: `/plants/${index}`, headers: { ...bearer(), 'x-request-id': `many-${index}` } })))
    await nextTurn()

    const ids = log.lines().filter((line) => line.msg === 'request completed').map((line) => line.reqId)
    expect(ids.sort()).toEqual(Array.from({ length: 20 }, (_, index) => `many-${index}`).sort())
  })

  it('shares its request id with every other line the request logs, such as a 500\'s error', async () => {
    const log = collectingStream()
    const store: PlantStore = { ...openMemoryStore(), get: () => Promise.reject(new Error('disk on fire')) }
    const app = await buildTestApp({ store, logStream: log.stream, config: { logLevel: 'info' } })

    const response = await app.inject({ method: 'GET', url: '/plants/5', headers: { ...bearer(), 'x-request-id': 'failing-1' } })
    await nextTurn()

    expect(response.statusCode).toBe(500)
    const lines = log.lines().filter((line) => line.reqId === 'failing-1')
    expect(lines.map((line) => [line.level, line.msg])).toEqual([
      [50, 'internal error; quote request id failing-1 to the operator'],
      [30, 'request completed']
    ])
    expect(lines[0]?.err).toMatchObject({ message: 'disk on fire' })
  })

  it('is not written below the info level', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'warn' } })

    await app.inject({ method: 'GET', url: '/plants/5', headers: bearer() })
    await nextTurn()

    expect(log.lines()).toEqual([])
  })

  it('is written out when the app closes, not lost with the turn', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' } })

    await app.inject({ method: 'GET', url: '/plants/5', headers: { ...bearer(), 'x-request-id': 'before-close' } })
    await app.close()

    expect(log.lines().map((line) => line.reqId)).toContain('before-close')
  })
})

describe('The client address of the log line (remoteAddress)', () => {
  async function loggedAddress (trustProxy: AppConfig['trustProxy'], peer: string, forwardedFor?: string): Promise<unknown> {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info', ...(trustProxy === undefined ? {} : { trustProxy }) } })
    await app.inject({
      method: 'GET',
      url: '/healthz',
      remoteAddress: peer,
      headers: { 'x-request-id': 'client', ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }) }
    })
    await nextTurn()
    return log.lines().find((line) => line.reqId === 'client')?.remoteAddress
  }

  it('is the peer\'s address, whatever X-Forwarded-For says, by default (TRUST_PROXY=false)', async () => {
    expect(await loggedAddress(undefined, '192.0.2.7', '203.0.113.9')).toBe('192.0.2.7')
    expect(await loggedAddress(false, '127.0.0.1', '203.0.113.9')).toBe('127.0.0.1')
  })

  it('is the address the trusted proxy saw when TRUST_PROXY names that proxy', async () => {
    expect(await loggedAddress('127.0.0.1', '127.0.0.1', '203.0.113.9')).toBe('203.0.113.9')
    // The client wrote the first entry itself; the proxy appended the address it saw.
    expect(await loggedAddress('10.0.0.0/8,127.0.0.1', '10.1.2.3', '198.51.100.1, 203.0.113.9')).toBe('203.0.113.9')
    expect(await loggedAddress('loopback', '::1', '2001:db8::5')).toBe('2001:db8::5')
  })

  it('ignores X-Forwarded-For from a peer TRUST_PROXY does not name', async () => {
    expect(await loggedAddress('10.0.0.0/8', '192.0.2.7', '203.0.113.9')).toBe('192.0.2.7')
  })

  it('believes every entry with TRUST_PROXY=true, down to the one the client wrote: safe only behind a proxy that replaces the header', async () => {
    expect(await loggedAddress(true, '127.0.0.1', '198.51.100.1, 203.0.113.9')).toBe('198.51.100.1')
  })

  it('escapes an X-Forwarded-For entry a trusted proxy let through unchecked', async () => {
    expect(await loggedAddress(true, '127.0.0.1', 'not "an" address')).toBe('not "an" address')
  })

  it('has the same place and keys on a terminal\'s pretty line as on the JSON line', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' } })
    await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'json-line' } })
    await nextTurn()
    const prettyFields: Array<Record<string, unknown>> = []
    const request = { id: 'pretty-line', method: 'GET', url: '/healthz', ip: '127.0.0.1', accessToken: null, plantListing: null, plantBatch: null, changeStream: null }
    const reply = { statusCode: 200, elapsedTime: 1.25, log: { info: (fields: Record<string, unknown>) => { prettyFields.push(fields) } } }

    new CompletedRequestLog('info').requestCompleted(null, request as unknown as FastifyRequest, reply as unknown as FastifyReply)

    const jsonLine = log.lines().find((line) => line.reqId === 'json-line') ?? {}
    const { level: _level, time: _time, pid: _pid, hostname: _hostname, reqId: _reqId, msg: _msg, ...jsonFields } = jsonLine
    expect(prettyFields).toEqual([{ method: 'GET', url: '/healthz', remoteAddress: '127.0.0.1', statusCode: 200, responseTime: 1.25 }])
    expect(Object.keys(prettyFields[0] ?? {})).toEqual(Object.keys(jsonFields))
  })
})
