import { connect } from 'node:net'
import { join } from 'node:path'
import fc from 'fast-check'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it } from 'vitest'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { bearer, buildTestApp, temporaryFolder } from '../helpers/app.js'

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

/** Every stored plant's JSON document, by id (the ids exact: read as text). */
async function storedDocuments (app: FastifyInstance): Promise<Map<string, string>> {
  const response = await app.inject({ method: 'GET', url: '/plants?limit=1000', headers: bearer() })
  expect(response.statusCode).toBe(200)
  const plants = JSON.parse(response.body.replace(/"id":(-?\d+)/g, '"id":"$1"')) as Array<{ id: string, name: string, tag?: string }>
  return new Map(plants.map((plant) => [plant.id, JSON.stringify(plant).replace(/^\{"id":"(-?\d+)"/, '{"id":$1')]))
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

/** Mostly text the field rules accept, so that updates get as far as the store. */
const updateText = fc.oneof(
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).map((text) => JSON.stringify(text)) },
  { weight: 1, arbitrary: textLike }
)
/** A JSON object's text with the members that are not undefined, each value given as JSON text. */
const objectText = (members: Record<string, string | undefined>) =>
  `{${Object.entries(members).filter(([, value]) => value !== undefined).map(([key, value]) => `"${key}":${value}`).join(',')}}`
/** A PUT or PATCH body: an object whose members may be absent, of the wrong type, or clash with the path id; or any text. */
const updateBody = (pathId: string) => fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      id: fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: fc.constant(pathId) }, { weight: 1, arbitrary: idLike }),
      name: fc.option(updateText, { nil: undefined }),
      tag: fc.option(updateText, { nil: undefined }),
      extra: fc.option(fc.json(), { nil: undefined })
    }).map(objectText)
  },
  { weight: 1, arbitrary: bodyText }
)
/** Ids of plants the property creates first, and a few it never does (which PUT may create). */
const pathId = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('1', '-2', '9223372036854775807', '3', '-9223372036854775808') },
  { weight: 1, arbitrary: idLike }
)
/** An If-Match or If-None-Match value: absent, the plant's current ETag, well-formed lists, or any printable text. */
const CURRENT_ENTITY_TAG = Symbol('the current ETag')
const preconditionValue = fc.option(fc.oneof(
  { weight: 2, arbitrary: fc.constant(CURRENT_ENTITY_TAG) },
  { weight: 2, arbitrary: fc.constantFrom('*', ' * ', '"x"', 'W/"x"', '"x", W/"y"', '""', ',', 'W/', '"unterminated', '*, "x"') },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 80 }) }
), { nil: undefined, freq: 2 })
/** The method's own media type (most often), another one, or none. */
const THE_METHODS_MEDIA_TYPE = Symbol('the method\'s media type')
const updateContentType = fc.oneof(
  { weight: 4, arbitrary: fc.constant(THE_METHODS_MEDIA_TYPE) },
  {
    weight: 1,
    arbitrary: fc.option(fc.constantFrom(
      'application/json', 'application/merge-patch+json', 'application/merge-patch+json; charset=utf-8',
      'application/merge-patch+json; charset=latin1', 'text/plain', 'application/merge-patch+jsonx'
    ), { nil: undefined })
  }
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

  it('PUT and PATCH with any path id, body, Content-Type, If-Match and If-None-Match: never a 5xx, only the path\'s plant changed, nothing for a refusal', async () => {
    const app = await buildTestApp({ store: openSqliteStore(join(temporaryFolder(), 'fuzz-updates.db')) })
    for (const [id, tag] of [['1', 'a'], ['-2', ''], ['9223372036854775807', undefined]] as const) {
      const seeded = await app.inject({
        method: 'PUT', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/json' }, payload: JSON.stringify({ name: `seed ${id}`, tag })
      })
      expect(seeded.statusCode).toBe(201)
    }

    const request = fc.record({
      method: fc.constantFrom('PUT', 'PATCH'),
      id: pathId,
      contentType: updateContentType,
      ifMatch: preconditionValue,
      ifNoneMatch: preconditionValue
    }).chain((fields) => updateBody(fields.id).map((payload) => ({ ...fields, payload })))

    await fc.assert(fc.asyncProperty(request, async ({ method, id, contentType, ifMatch, ifNoneMatch, payload }) => {
      const url = `/plants/${encodeURIComponent(id)}`
      const current = async () => (await app.inject({ method: 'GET', url, headers: bearer() })).headers.etag ?? '"no plant"'
      const precondition = async (value: string | typeof CURRENT_ENTITY_TAG | undefined) => value === CURRENT_ENTITY_TAG ? current() : value
      const headers: Record<string, string> = { ...bearer() }
      if (contentType === THE_METHODS_MEDIA_TYPE) headers['content-type'] = method === 'PUT' ? 'application/json' : 'application/merge-patch+json'
      else if (contentType !== undefined) headers['content-type'] = contentType
      const ifMatchValue = await precondition(ifMatch)
      const ifNoneMatchValue = await precondition(ifNoneMatch)
      if (ifMatchValue !== undefined) headers['if-match'] = ifMatchValue
      if (ifNoneMatchValue !== undefined) headers['if-none-match'] = ifNoneMatchValue
      const before = await storedDocuments(app)

      const response = await app.inject({ method, url, headers, payload })

      expectEnvelopeOrSuccess(response, [200, 201, 400, 404, 412, 413, 415], method)
      const after = await storedDocuments(app)
      if (response.statusCode === 412) expect(ifMatchValue !== undefined || ifNoneMatchValue !== undefined).toBe(true)
      if (response.statusCode === 200 || response.statusCode === 201) {
        expect(after.get(id)).toBe(response.body)
        expect(response.statusCode === 201).toBe(method === 'PUT' && !before.has(id))
        after.delete(id)
        before.delete(id)
      }
      expect(after).toEqual(before)
      expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    }), FUZZ)
  })

  it('paths and query strings: never a 5xx, always the Error envelope', async () => {
    const app = await buildTestApp()
    const segment = fc.oneof(fc.string({ maxLength: 30 }), fc.bigInt().map(String), fc.constantFrom('%00', '%E0%A4%A', '..', '%2F', ''))

    await fc.assert(fc.asyncProperty(segment, segment, fc.constantFrom('GET', 'DELETE', 'HEAD', 'PUT', 'PATCH', 'OPTIONS'), async (first, second, method) => {
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
