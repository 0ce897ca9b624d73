import { connect } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { bearer, buildTestApp } from '../helpers/app.js'

/** Sends raw bytes to a listening app and resolves with everything it answers until it closes the connection. */
async function rawExchange (app: FastifyInstance, request: string): Promise<string> {
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('app is not listening')
  const socket = connect(address.port, '127.0.0.1')
  onTestFinished(() => { socket.destroy() })
  return await new Promise((resolve, reject) => {
    let answer = ''
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')))
    socket.on('data', (chunk) => { answer += chunk.toString() })
    socket.on('close', () => resolve(answer))
    socket.on('error', reject)
    socket.write(request)
  })
}

describe('The Host header', () => {
  it.each([
    ['twice the same', 'Host: plants.example\r\nHost: plants.example\r\n'],
    ['two different ones', 'Host: plants.example\r\nhost: other.example\r\n'],
    ['three, in any case', 'HOST: a\r\nHost: a\r\nhost: a\r\n']
  ])('when a request has more than one (%s), then it is a 400 Error', async (_case, hosts) => {
    const app = await buildTestApp()
    await app.listen({ port: 0, host: '127.0.0.1' })

    const answer = await rawExchange(app, `GET /plants/1 HTTP/1.1\r\n${hosts}Authorization: ${bearer().authorization}\r\nConnection: close\r\n\r\n`)

    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/)
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toBe('{"error":400,"message":"the request has more than one Host header"}')
  })

  it('when a request has exactly one, then it is served', async () => {
    const app = await buildTestApp()
    await app.listen({ port: 0, host: '127.0.0.1' })

    const answer = await rawExchange(app, 'GET /healthz HTTP/1.1\r\nHost: plants.example\r\nConnection: close\r\n\r\n')

    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
  })
})
