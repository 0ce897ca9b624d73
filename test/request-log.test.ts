import { connect, type AddressInfo } from 'node:net'
import { hostname } from 'node:os'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import type { PlantStore } from '../src/store/plant-store.js'
import { openMemoryStore } from '../src/store/memory.js'
import { bearer, buildTestApp, TEST_TOKEN } from './helper.js'

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
  it('has the keys and the order of a pino line, with the request id, method, path, status, time and the token\'s name', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' }, tokens: [`name=grafana.dashboard;${TEST_TOKEN}`] })

    await app.inject({ method: 'GET', url: '/plants/5?x=1', headers: { ...bearer(), 'x-request-id': 'line-1' } })
    app.log.info({ reqId: 'pino', method: 'GET', url: '/', statusCode: 200, responseTime: 1, tokenName: 'x' }, 'request completed')
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
    const target = Buffer.from('/plants/"\\{|}^`?q="x"')

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
