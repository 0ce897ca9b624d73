import { connect } from 'node:net'
import { join } from 'node:path'
import fc from 'fast-check'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it } from 'vitest'
import { openSqliteStore } from '../../src/store/sqlite.js'
import { bearer, buildTestApp, temporaryFolder } from '../helper.js'

/** Fixed in CI; `FUZZ_SEED` and `FUZZ_RUNS` give a longer or different run on demand. */
const FUZZ = { seed: Number(process.env.FUZZ_SEED ?? 20261121), numRuns: Number(process.env.FUZZ_RUNS ?? 300) }

function expectEnvelopeOrSuccess (response: LightMyRequestResponse, allowed: readonly number[], method = 'POST'): void {
  expect(allowed).toContain(response.statusCode)
  expect(response.headers['x-request-id']).toMatch(/^[\x21-\x7e]{1,128}$/)
  if (response.statusCode >= 400 && method !== 'HEAD') {
    const body = response.json()
    expect(Object.keys(body).sort()).toEqual(['error', 'message'])
    expect(body.error).toBe(response.statusCode)
    expect(typeof body.message).toBe('string')
  }
}

async function storedIds (app: FastifyInstance): Promise<string[]> {
  const response = await app.inject({ method: 'GET', url: '/plants?limit=1000', headers: bearer() })
  return [...response.body.matchAll(/"id":(-?\d+)/g)].map((match) => match[1] as string)
}

const idLike = fc.oneof(
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String),
  fc.double().map(String),
  fc.constantFrom('1.0', '1e2', '-0', '1.5', '"5"', 'true', 'null', '[]', '{}', '9223372036854775807', '9223372036854775808')
)
const textLike = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }).map((text) => JSON.stringify(text)),
  fc.constantFrom('"\\u0000"', '"\\ud800"', '""', 'null', '1', '"x"')
)
const bodyText = fc.oneof(
  fc.record({ id: idLike, name: textLike, tag: fc.option(textLike, { nil: undefined }), extra: fc.option(fc.json(), { nil: undefined }) })
    .map(({ id, name, tag, extra }) => `{"id":${id},"name":${name}${tag === undefined ? '' : `,"tag":${tag}`}${extra === undefined ? '' : `,"extra":${extra}`}}`),
  fc.json(),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.constantFrom('{"__proto__":{"polluted":1},"id":1,"name":"a"}', '{"constructor":{"prototype":{"polluted":1}},"id":1,"name":"a"}')
)

describe('Hostile input, fuzzed with fast-check', () => {
  it('POST /plants bodies: never a 5xx, always the Error envelope, nothing stored for a refusal, no pollution', async () => {
    const app = await buildTestApp({ store: openSqliteStore(join(temporaryFolder(), 'fuzz.db')) })

    await fc.assert(fc.asyncProperty(bodyText, fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/jsonx'), async (payload, contentType) => {
      const before = await storedIds(app)
      const response = await app.inject({ method: 'POST', url: '/plants', headers: { ...bearer(), 'content-type': contentType }, payload })
      expectEnvelopeOrSuccess(response, [200, 400, 409, 413, 415])
      const after = await storedIds(app)
      if (response.statusCode === 200) {
        expect(after.length - before.length).toBeLessThanOrEqual(1)
      } else {
        expect(after).toEqual(before)
      }
      expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    }), FUZZ)
  })

  it('paths and query strings: never a 5xx, always the Error envelope', async () => {
    const app = await buildTestApp()
    const segment = fc.oneof(fc.string({ maxLength: 30 }), fc.bigInt().map(String), fc.constantFrom('%00', '%E0%A4%A', '..', '%2F', ''))

    await fc.assert(fc.asyncProperty(segment, segment, fc.constantFrom('GET', 'DELETE', 'HEAD', 'PUT', 'OPTIONS'), async (first, second, method) => {
      const url = `/plants/${encodeURI(first)}?limit=${encodeURIComponent(second)}&after=${encodeURI(second)}`
      const response = await app.inject({ method, url, headers: bearer() })
      expectEnvelopeOrSuccess(response, [200, 204, 400, 404, 405, 414], method)
    }), FUZZ)
  })

  it('headers: any Authorization, Content-Type or x-request-id value gets an answer in the envelope, never a 5xx', async () => {
    const app = await buildTestApp()
    const headerValue = fc.string({ unit: 'grapheme-ascii', maxLength: 200 })

    await fc.assert(fc.asyncProperty(headerValue, headerValue, headerValue, async (authorization, contentType, requestId) => {
      const response = await app.inject({
        method: 'POST', url: '/plants', payload: '{"id":1,"name":"a"}', headers: { authorization, 'content-type': contentType, 'x-request-id': requestId }
      })
      expectEnvelopeOrSuccess(response, [200, 400, 401, 409, 415])
      if (!/^[\x21-\x7e]{1,128}$/.test(requestId)) expect(response.headers['x-request-id']).not.toBe(requestId)
    }), FUZZ)
  })
})

describe('Hostile requests on a real socket', () => {
  async function raw (app: FastifyInstance, request: string): Promise<string> {
    const address = app.server.address()
    if (address === null || typeof address === 'string') throw new Error('not listening')
    return new Promise((resolve, reject) => {
      const socket = connect(address.port, '127.0.0.1')
      let answer = ''
      socket.setTimeout(5000, () => socket.destroy(new Error('no answer')))
      socket.on('data', (chunk) => { answer += chunk.toString() })
      socket.on('close', () => resolve(answer))
      socket.on('error', reject)
      socket.write(request)
    })
  }

  it.each([
    ['a CR inside x-request-id', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc\rdef\r\n\r\n', 400],
    ['an over-long URL', `GET /plants/${'9'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431],
    ['a NUL in the request line', 'GET /hea\u0000lthz HTTP/1.1\r\nHost: x\r\n\r\n', 400],
    ['bare LF line endings', 'GET /healthz HTTP/1.1\nHost: x\n\n', 400]
  ])('answers %s in the envelope, with a fresh request id', async (_case, request, status) => {
    const app = await buildTestApp()
    await app.listen({ port: 0, host: '127.0.0.1' })

    const answer = await raw(app, request)

    expect(answer.startsWith(`HTTP/1.1 ${status} `)).toBe(true)
    expect(answer).toMatch(/x-request-id: [0-9a-f-]{36}\r\n/i)
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toMatch(new RegExp(`^\\{"error":${status},"message":"[^"]+"\\}$`))
  })
})
