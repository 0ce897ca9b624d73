import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, expectError, postPlant, sharedTestApp, TEST_TOKEN, withoutPlants } from '../helpers/app.js'

const ENTITY_TAG = /^"[A-Za-z0-9_-]{27}"$/
const MIN = '-9223372036854775808'
const MAX = '9223372036854775807'
const ABOVE_DOUBLE_PRECISION = '9007199254740993'
const READER_SECRET = 'plants-update-reader-3a9c51'
const MERGE_PATCH = 'application/merge-patch+json'
const MALFORMED_IF_MATCH = 'header If-Match must be * or a comma-separated list of quoted entity tags, such as "xyzzy", W/"xyzzy"'

type Headers = Record<string, string>

const payloadOf = (body: unknown) => typeof body === 'string' ? body : JSON.stringify(body)

/** PUT /plants/{id} with a JSON body given as a value or as raw text (for exact int64 literals). */
const put = (app: FastifyInstance, id: string, body: unknown, headers: Headers = {}) => app.inject({
  method: 'PUT', url: `/plants/${id}`, headers: { 'content-type': 'application/json', ...bearer(), ...headers }, payload: payloadOf(body)
})

/** PATCH /plants/{id} with a merge patch given as a value or as raw text. */
const patch = (app: FastifyInstance, id: string, body: unknown, headers: Headers = {}) => app.inject({
  method: 'PATCH', url: `/plants/${id}`, headers: { 'content-type': MERGE_PATCH, ...bearer(), ...headers }, payload: payloadOf(body)
})

const get = (app: FastifyInstance, id: string, headers: Headers = {}) =>
  app.inject({ method: 'GET', url: `/plants/${id}`, headers: { ...bearer(), ...headers } })

const remove = (app: FastifyInstance, id: string, headers: Headers = {}) =>
  app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: { ...bearer(), ...headers } })

/** Asserts a single-plant answer: the status, the exact JSON text, and a strong ETag, which it returns. */
function expectPlant (response: LightMyRequestResponse, status: number, body: string): string {
  expect({ status: response.statusCode, body: response.body }).toEqual({ status, body })
  expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
  const entityTag = response.headers.etag
  expect(entityTag).toMatch(ENTITY_TAG)
  return entityTag as string
}

/** Asserts through GET that the plant is stored as `body`, with the ETag `entityTag` when one is given; returns its ETag. */
async function expectStored (app: FastifyInstance, id: string, body: string, entityTag?: string): Promise<string> {
  const current = expectPlant(await get(app, id), 200, body)
  if (entityTag !== undefined) expect(current).toBe(entityTag)
  return current
}

async function expectAbsent (app: FastifyInstance, id: string): Promise<void> {
  expectError(await get(app, id), 404, `no plant has id ${id}`)
}

/** Stores a plant through PUT and returns its ETag. */
async function stored (app: FastifyInstance, id: string, plant: { name: string, tag?: string }): Promise<string> {
  const response = await put(app, id, plant)
  expect([200, 201]).toContain(response.statusCode)
  return response.headers.etag as string
}

const stateChanged = (id: string) =>
  `plant ${id} is not in the state the request's If-Match or If-None-Match expects; read it again for its current ETag`
const absentForIfMatch = (id: string) => `plant ${id} does not exist, and the request's If-Match needs it to`
const idMismatch = (pathId: string, bodyId: string) =>
  `id in the body (${bodyId}) must equal the id in the path (${pathId}); a plant's id cannot change`

/** Bodies that break a rule of the body of PUT or PATCH alike, with the message each gets. */
const BROKEN_BODIES: ReadonlyArray<readonly [string, string]> = [
  ['{"name":123}', 'name must be a string'],
  ['{"name":"a","tag":123}', 'tag must be a string'],
  [`{"name":"${'🌵'.repeat(257)}"}`, 'name must be at most 256 characters long'],
  [`{"name":"a","tag":"${'y'.repeat(257)}"}`, 'tag must be at most 256 characters long'],
  ['{"name":""}', 'name must be at least 1 character long'],
  ['{"name":"a\\u0000b"}', 'name must not contain U+0000 or unpaired surrogates'],
  ['{"name":"a","tag":"\\ud800"}', 'tag must not contain U+0000 or unpaired surrogates'],
  ['{"id":"5","name":"a"}', 'id must be an integer from -9223372036854775808 to 9223372036854775807'],
  ['{"id":5.5,"name":"a"}', 'id must be an integer from -9223372036854775808 to 9223372036854775807'],
  ['[]', 'request body must be a JSON object'],
  ['"x"', 'request body must be a JSON object'],
  ['{"name":"a"', "request body is not valid JSON: expected '}' at position 11"]
]

describe.each(backends)('Updating plants on $name', (backend) => {
  const shared = sharedTestApp(backend)
  /** The app the tests share, without plants under `ids`: each test starts as on a fresh store for the ids it uses. */
  const appWithout = (...ids: string[]) => withoutPlants(shared(), ...ids)

  describe('PUT /plants/{id}', () => {
    it('creates an absent plant (201, Location), then replaces it whole (200); identical content keeps the ETag', async () => {
      const app = await appWithout('5')

      const created = await put(app, '5', { name: 'Monstera', tag: 'tropical' })
      const tagged = expectPlant(created, 201, '{"id":5,"name":"Monstera","tag":"tropical"}')
      expect(created.headers.location).toBe('/plants/5')
      await expectStored(app, '5', '{"id":5,"name":"Monstera","tag":"tropical"}', tagged)

      const identical = await put(app, '5', { name: 'Monstera', tag: 'tropical' })
      expect(expectPlant(identical, 200, '{"id":5,"name":"Monstera","tag":"tropical"}')).toBe(tagged)

      const untagged = await put(app, '5', { name: 'Swiss cheese plant' })
      const untaggedTag = expectPlant(untagged, 200, '{"id":5,"name":"Swiss cheese plant"}')
      expect(untagged.headers.location).toBeUndefined()
      await expectStored(app, '5', '{"id":5,"name":"Swiss cheese plant"}', untaggedTag)

      const emptyTagged = await put(app, '5', { name: 'Swiss cheese plant', tag: '' })
      const emptyTag = expectPlant(emptyTagged, 200, '{"id":5,"name":"Swiss cheese plant","tag":""}')
      await expectStored(app, '5', '{"id":5,"name":"Swiss cheese plant","tag":""}', emptyTag)
      expect(new Set([tagged, untaggedTag, emptyTag]).size).toBe(3)
    })

    it('keeps ids exact at the int64 extremes and beyond 2^53, in the path and in the body', async () => {
      const app = await appWithout(MIN, MAX, ABOVE_DOUBLE_PRECISION, '9007199254740992')

      for (const id of [MIN, MAX, ABOVE_DOUBLE_PRECISION]) {
        const created = await put(app, id, `{"id":${id},"name":"edge"}`)
        const replaced = await put(app, id, `{"id":${id},"name":"edge","tag":"t"}`)

        expectPlant(created, 201, `{"id":${id},"name":"edge"}`)
        expect(created.headers.location).toBe(`/plants/${id}`)
        const entityTag = expectPlant(replaced, 200, `{"id":${id},"name":"edge","tag":"t"}`)
        await expectStored(app, id, `{"id":${id},"name":"edge","tag":"t"}`, entityTag)
      }
      await expectAbsent(app, '9007199254740992')
    })

    it('accepts an id member equal to the path id in any JSON integer spelling, and refuses any other, changing nothing', async () => {
      const app = await appWithout('5', '-7', '6', '8', '9', ABOVE_DOUBLE_PRECISION, '9007199254740992')

      expectPlant(await put(app, '5', '{"id":5,"name":"a"}'), 201, '{"id":5,"name":"a"}')
      expectPlant(await put(app, '5', '{"id":5.0,"name":"b"}'), 200, '{"id":5,"name":"b"}')
      expectPlant(await put(app, '-7', '{"id":-0.7e1,"name":"d"}'), 201, '{"id":-7,"name":"d"}')
      const entityTag = expectPlant(await put(app, '5', '{"id":5e0,"name":"c"}'), 200, '{"id":5,"name":"c"}')

      expectError(await put(app, '5', '{"id":6,"name":"moved"}'), 400, idMismatch('5', '6'))
      expectError(await put(app, '8', '{"id":9,"name":"moved"}'), 400, idMismatch('8', '9'))
      await stored(app, ABOVE_DOUBLE_PRECISION, { name: 'kept' })
      expectError(await put(app, ABOVE_DOUBLE_PRECISION, '{"id":9007199254740992,"name":"moved"}'), 400,
        idMismatch(ABOVE_DOUBLE_PRECISION, '9007199254740992'))

      await expectStored(app, '5', '{"id":5,"name":"c"}', entityTag)
      await expectStored(app, ABOVE_DOUBLE_PRECISION, `{"id":${ABOVE_DOUBLE_PRECISION},"name":"kept"}`)
      for (const id of ['6', '8', '9', '9007199254740992']) await expectAbsent(app, id)
    })

    it('refuses a body or media type POST would refuse, on an existing or an absent plant, changing nothing', async () => {
      const app = await appWithout('5', '6')
      const entityTag = await stored(app, '5', { name: 'kept', tag: 'k' })
      const putBreaks: ReadonlyArray<readonly [string, string]> = [
        ...BROKEN_BODIES,
        ['{"tag":"t"}', 'name is required'],
        ['{"name":"a","tag":null}', 'tag must be a string']
      ]

      for (const [body, message] of putBreaks) {
        expectError(await put(app, '5', body), 400, message)
        expectError(await put(app, '6', body), 400, message)
      }
      expectError(await put(app, '5', { name: 'b' }, { 'content-type': 'text/plain' }), 415, 'Content-Type must be application/json')
      expectError(await put(app, '5', { name: 'b' }, { 'content-type': MERGE_PATCH }), 415, 'Content-Type must be application/json')
      expectError(await postPlant(app, { id: 6, name: 'b' }, { 'content-type': MERGE_PATCH }), 415, 'Content-Type must be application/json')

      await expectStored(app, '5', '{"id":5,"name":"kept","tag":"k"}', entityTag)
      await expectAbsent(app, '6')
    })

    it('accepts 256 code points in name and tag, and ignores unknown keys, __proto__ included', async () => {
      const app = await appWithout('5', '6')
      const name = '🌵'.repeat(256)
      const tag = 'é'.repeat(256)

      const longest = await put(app, '5', { name, tag })
      const withUnknownKeys = await put(app, '6',
        '{"name":"a","colour":"green","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"tag":"t"}')

      expectPlant(longest, 201, JSON.stringify({ id: 5, name, tag }))
      await expectStored(app, '5', JSON.stringify({ id: 5, name, tag }))
      expectPlant(withUnknownKeys, 201, '{"id":6,"name":"a","tag":"t"}')
      await expectStored(app, '6', '{"id":6,"name":"a","tag":"t"}')
      expect(Object.prototype).not.toHaveProperty('polluted')
    })
  })

  describe('PATCH /plants/{id}', () => {
    it('merges: a name renames, a tag sets, null removes the tag, {} and unknown keys change nothing', async () => {
      const app = await appWithout('5')
      const original = await stored(app, '5', { name: 'Monstera', tag: 'tropical' })

      const renamed = expectPlant(await patch(app, '5', { name: 'Swiss cheese plant' }), 200, '{"id":5,"name":"Swiss cheese plant","tag":"tropical"}')
      await expectStored(app, '5', '{"id":5,"name":"Swiss cheese plant","tag":"tropical"}', renamed)
      expectPlant(await patch(app, '5', { tag: '' }), 200, '{"id":5,"name":"Swiss cheese plant","tag":""}')
      const untagged = expectPlant(await patch(app, '5', { tag: null }), 200, '{"id":5,"name":"Swiss cheese plant"}')
      await expectStored(app, '5', '{"id":5,"name":"Swiss cheese plant"}', untagged)
      const retagged = expectPlant(await patch(app, '5', '{"tag":null,"tag":"shade"}'), 200, '{"id":5,"name":"Swiss cheese plant","tag":"shade"}')

      const empty = await patch(app, '5', {})
      const unknownOnly = await patch(app, '5', '{"colour":"green","__proto__":{"polluted":true}}')
      expect(expectPlant(empty, 200, '{"id":5,"name":"Swiss cheese plant","tag":"shade"}')).toBe(retagged)
      expect(expectPlant(unknownOnly, 200, '{"id":5,"name":"Swiss cheese plant","tag":"shade"}')).toBe(retagged)
      expect(Object.prototype).not.toHaveProperty('polluted')
      expect(new Set([original, renamed, untagged, retagged]).size).toBe(4)
    })

    it('accepts an id member equal to the path id in any JSON integer spelling, exact beyond 2^53', async () => {
      const app = await appWithout(ABOVE_DOUBLE_PRECISION, '5')
      await stored(app, ABOVE_DOUBLE_PRECISION, { name: 'a' })
      await stored(app, '5', { name: 'a' })

      const exact = await patch(app, ABOVE_DOUBLE_PRECISION, `{"id":${ABOVE_DOUBLE_PRECISION},"name":"b"}`)
      const decimal = await patch(app, '5', '{"id":5.0,"name":"c"}')
      const exponent = await patch(app, '5', '{"id":5e0,"tag":"t"}')

      expectPlant(exact, 200, `{"id":${ABOVE_DOUBLE_PRECISION},"name":"b"}`)
      expectPlant(decimal, 200, '{"id":5,"name":"c"}')
      const entityTag = expectPlant(exponent, 200, '{"id":5,"name":"c","tag":"t"}')
      await expectStored(app, '5', '{"id":5,"name":"c","tag":"t"}', entityTag)
    })

    it('refuses a patch that breaks a rule, {"name":null} and another id included, with its message, changing nothing', async () => {
      const app = await appWithout('5')
      const entityTag = await stored(app, '5', { name: 'kept', tag: 'k' })
      const patchBreaks: ReadonlyArray<readonly [string, string]> = [
        ...BROKEN_BODIES,
        ['{"name":null}', 'name must be a string'],
        ['{"tag":123}', 'tag must be a string'],
        ['{"id":6,"name":"moved"}', idMismatch('5', '6')],
        ['{"id":9007199254740992}', idMismatch('5', '9007199254740992')],
        ['null', 'request body must be a JSON object']
      ]

      for (const [body, message] of patchBreaks) {
        expectError(await patch(app, '5', body), 400, message)
      }

      await expectStored(app, '5', '{"id":5,"name":"kept","tag":"k"}', entityTag)
    })

    it('answers 404 for an absent plant and creates nothing', async () => {
      const app = await appWithout('7', MIN)

      expectError(await patch(app, '7', { name: 'x', tag: 't' }), 404, 'no plant has id 7')
      expectError(await patch(app, MIN, {}), 404, `no plant has id ${MIN}`)

      await expectAbsent(app, '7')
      await expectAbsent(app, MIN)
    })

    it('takes only application/merge-patch+json: application/json, text/plain or none are 415s and change nothing', async () => {
      const app = await appWithout('5')
      const entityTag = await stored(app, '5', { name: 'kept' })
      const untyped = await app.inject({ method: 'PATCH', url: '/plants/5', headers: bearer(), payload: '{"name":"b"}' })

      expectError(await patch(app, '5', { name: 'b' }, { 'content-type': 'application/json' }), 415, `Content-Type must be ${MERGE_PATCH}`)
      expectError(await patch(app, '5', { name: 'b' }, { 'content-type': 'text/plain' }), 415, `Content-Type must be ${MERGE_PATCH}`)
      expectError(untyped, 415, `Content-Type must be ${MERGE_PATCH}`)
      await expectStored(app, '5', '{"id":5,"name":"kept"}', entityTag)

      const withCharset = await patch(app, '5', { name: 'c' }, { 'content-type': `${MERGE_PATCH}; charset=utf-8` })
      expectPlant(withCharset, 200, '{"id":5,"name":"c"}')
    })

    it('refuses a PATCH without a body: none at all is a 400 like a non-object, an empty merge patch is not JSON; nothing changes', async () => {
      const app = await appWithout('5', '6')
      const entityTag = await stored(app, '5', { name: 'kept', tag: 'k' })
      const bodiless = (id: string) => app.inject({ method: 'PATCH', url: `/plants/${id}`, headers: bearer() })

      expectError(await bodiless('5'), 400, 'request body must be a JSON object')
      expectError(await bodiless('6'), 400, 'request body must be a JSON object')
      expectError(await patch(app, '5', ''), 400, 'request body is empty; send a JSON object as application/merge-patch+json')

      await expectStored(app, '5', '{"id":5,"name":"kept","tag":"k"}', entityTag)
      await expectAbsent(app, '6')
    })
  })

  describe('POST after PUT or PATCH', () => {
    it('replays a POST of the plant as it is now (200) and refuses one of its former content (409), changing nothing', async () => {
      const app = await appWithout('5', '6')
      expect((await postPlant(app, { id: 5, name: 'Monstera', tag: 'tropical' })).statusCode).toBe(200)
      expect((await postPlant(app, { id: 6, name: 'Fern' })).statusCode).toBe(200)
      expectPlant(await put(app, '5', { name: 'Swiss cheese plant' }), 200, '{"id":5,"name":"Swiss cheese plant"}')
      const patched = expectPlant(await patch(app, '6', { tag: '' }), 200, '{"id":6,"name":"Fern","tag":""}')

      const replayed = await postPlant(app, { id: 6, name: 'Fern', tag: '' })
      const former = await postPlant(app, { id: 6, name: 'Fern' })
      const replaced = await postPlant(app, { id: 5, name: 'Swiss cheese plant' })
      const beforeReplace = await postPlant(app, { id: 5, name: 'Monstera', tag: 'tropical' })

      expect({ status: replayed.statusCode, body: replayed.body, location: replayed.headers.location, etag: replayed.headers.etag })
        .toEqual({ status: 200, body: '{"name":"Fern","tag":""}', location: '/plants/6', etag: patched })
      expect({ status: replaced.statusCode, body: replaced.body, location: replaced.headers.location })
        .toEqual({ status: 200, body: '{"name":"Swiss cheese plant"}', location: '/plants/5' })
      expectError(former, 409, 'plant 6 already exists with a different name or tag')
      expectError(beforeReplace, 409, 'plant 5 already exists with a different name or tag')
      await expectStored(app, '5', '{"id":5,"name":"Swiss cheese plant"}', replaced.headers.etag as string)
      await expectStored(app, '6', '{"id":6,"name":"Fern","tag":""}', patched)
    })
  })

  describe('ETag', () => {
    it('is one value per content on every single-plant answer, and changes exactly when the name or the tag does', async () => {
      const app = await appWithout(ABOVE_DOUBLE_PRECISION)
      const plant = `{"id":${ABOVE_DOUBLE_PRECISION},"name":"A","tag":""}`

      const created = await postPlant(app, plant)
      const replayed = await postPlant(app, plant)
      const original = expectPlant(await get(app, ABOVE_DOUBLE_PRECISION), 200, plant)
      const replaced = await put(app, ABOVE_DOUBLE_PRECISION, { name: 'A', tag: '' })
      const patched = await patch(app, ABOVE_DOUBLE_PRECISION, { name: 'A' })
      expect(created.statusCode).toBe(200)
      expect([created, replayed, replaced, patched].map((response) => response.headers.etag))
        .toEqual([original, original, original, original])

      const renamed = await stored(app, ABOVE_DOUBLE_PRECISION, { name: 'B', tag: '' })
      const renamedBack = await stored(app, ABOVE_DOUBLE_PRECISION, { name: 'A', tag: '' })
      const untagged = await stored(app, ABOVE_DOUBLE_PRECISION, { name: 'A' })
      const otherTag = await stored(app, ABOVE_DOUBLE_PRECISION, { name: 'A', tag: 'x' })
      expect(renamedBack).toBe(original)
      expect(new Set([original, renamed, untagged, otherTag]).size).toBe(4)
    })

    it('is the same on HEAD as on GET, and HEAD answers If-None-Match like GET', async () => {
      const app = await appWithout('5')
      const stale = await stored(app, '5', { name: 'a' })
      const current = await stored(app, '5', { name: 'b', tag: 't' })
      const head = (headers: Headers = {}) => app.inject({ method: 'HEAD', url: '/plants/5', headers: { ...bearer(), ...headers } })

      const plain = await head()
      const notModified = await head({ 'if-none-match': current })
      const modified = await head({ 'if-none-match': stale })

      expect({ status: plain.statusCode, body: plain.body, etag: plain.headers.etag }).toEqual({ status: 200, body: '', etag: current })
      expect(plain.headers['content-type']).toBe('application/json; charset=utf-8')
      expect({ status: notModified.statusCode, body: notModified.body, etag: notModified.headers.etag }).toEqual({ status: 304, body: '', etag: current })
      expect({ status: modified.statusCode, body: modified.body, etag: modified.headers.etag }).toEqual({ status: 200, body: '', etag: current })
      await expectStored(app, '5', '{"id":5,"name":"b","tag":"t"}', current)
    })
  })

  describe('conditional requests', () => {
    it('writes when If-Match names the current ETag, alone, in a list or as *: PUT, PATCH, then DELETE', async () => {
      const app = await appWithout('5')
      const first = await stored(app, '5', { name: 'a' })

      const second = expectPlant(await put(app, '5', { name: 'b' }, { 'if-match': first }), 200, '{"id":5,"name":"b"}')
      const listed = await patch(app, '5', { tag: 't' }, { 'if-match': `${first}, W/${second} ,,"other", ${second}` })
      const third = expectPlant(listed, 200, '{"id":5,"name":"b","tag":"t"}')
      const fourth = expectPlant(await put(app, '5', { name: 'c' }, { 'if-match': '*' }), 200, '{"id":5,"name":"c"}')
      await expectStored(app, '5', '{"id":5,"name":"c"}', fourth)
      const deleted = await remove(app, '5', { 'if-match': fourth })

      expect({ status: deleted.statusCode, body: deleted.body }).toEqual({ status: 204, body: '' })
      await expectAbsent(app, '5')
      expect(new Set([first, second, third, fourth]).size).toBe(4)
    })

    it('answers 412 when If-Match names a stale or a weak ETag, for PUT, PATCH and DELETE, changing nothing', async () => {
      const app = await appWithout('5')
      const stale = await stored(app, '5', { name: 'a' })
      const current = await stored(app, '5', { name: 'b', tag: 't' })

      for (const ifMatch of [stale, `W/${current}`, `W/${stale}, W/${current}`]) {
        expectError(await put(app, '5', { name: 'c' }, { 'if-match': ifMatch }), 412, stateChanged('5'))
        expectError(await patch(app, '5', { name: 'c' }, { 'if-match': ifMatch }), 412, stateChanged('5'))
        expectError(await remove(app, '5', { 'if-match': ifMatch }), 412, stateChanged('5'))
      }

      await expectStored(app, '5', '{"id":5,"name":"b","tag":"t"}', current)
    })

    it('answers 412 to If-Match on an absent plant, * included, for PUT, PATCH and DELETE, creating nothing', async () => {
      const app = await appWithout('5', '6')
      const elsewhere = await stored(app, '6', { name: 'a' })

      for (const ifMatch of ['*', elsewhere]) {
        expectError(await put(app, '5', { name: 'a' }, { 'if-match': ifMatch }), 412, absentForIfMatch('5'))
        expectError(await patch(app, '5', { name: 'a' }, { 'if-match': ifMatch }), 412, absentForIfMatch('5'))
        expectError(await remove(app, '5', { 'if-match': ifMatch }), 412, absentForIfMatch('5'))
      }

      await expectAbsent(app, '5')
    })

    it('creates with If-None-Match: * when the plant is absent, and answers 412 once it exists', async () => {
      const app = await appWithout('5')

      const created = await put(app, '5', { name: 'a' }, { 'if-none-match': '*' })
      const entityTag = expectPlant(created, 201, '{"id":5,"name":"a"}')
      expect(created.headers.location).toBe('/plants/5')
      const again = await put(app, '5', { name: 'b' }, { 'if-none-match': '*' })

      expectError(again, 412, stateChanged('5'))
      await expectStored(app, '5', '{"id":5,"name":"a"}', entityTag)
    })

    it('answers GET with 304 (no body, the ETag) when If-None-Match holds the current ETag, weakly compared; 412 when If-Match does not', async () => {
      const app = await appWithout('5')
      const stale = await stored(app, '5', { name: 'a' })
      const current = await stored(app, '5', { name: 'b' })

      for (const ifNoneMatch of [current, `W/${current}`, `${stale}, ${current}`, '*']) {
        const response = await get(app, '5', { 'if-none-match': ifNoneMatch })
        expect({ status: response.statusCode, body: response.body, etag: response.headers.etag })
          .toEqual({ status: 304, body: '', etag: current })
      }
      expectPlant(await get(app, '5', { 'if-none-match': stale }), 200, '{"id":5,"name":"b"}')
      expectPlant(await get(app, '5', { 'if-none-match': `W/${stale}` }), 200, '{"id":5,"name":"b"}')

      expectError(await get(app, '5', { 'if-match': stale }), 412, stateChanged('5'))
      expectError(await get(app, '5', { 'if-match': `W/${current}` }), 412, stateChanged('5'))
      expect(expectPlant(await get(app, '5', { 'if-match': current }), 200, '{"id":5,"name":"b"}')).toBe(current)
    })

    it('answers GET with 404 for an absent plant whatever If-None-Match holds', async () => {
      const app = await appWithout('5', '6')
      const elsewhere = await stored(app, '6', { name: 'a' })

      for (const ifNoneMatch of ['*', elsewhere, `W/${elsewhere}`]) {
        expectError(await get(app, '5', { 'if-none-match': ifNoneMatch }), 404, 'no plant has id 5')
      }
      await expectAbsent(app, '5')
    })

    it('refuses a malformed If-Match or If-None-Match with a 400 naming the header, changing nothing', async () => {
      const app = await appWithout('5')
      const current = await stored(app, '5', { name: 'a' })

      expectError(await put(app, '5', { name: 'b' }, { 'if-match': 'abc' }), 400, MALFORMED_IF_MATCH)
      expectError(await patch(app, '5', { name: 'b' }, { 'if-match': `${current}, abc` }), 400, MALFORMED_IF_MATCH)
      expectError(await remove(app, '5', { 'if-match': current.slice(1, -1) }), 400, MALFORMED_IF_MATCH)
      expectError(await get(app, '5', { 'if-match': 'abc' }), 400, MALFORMED_IF_MATCH)
      expectError(await put(app, '5', { name: 'b' }, { 'if-none-match': 'abc' }), 400, MALFORMED_IF_MATCH.replace('If-Match', 'If-None-Match'))

      await expectStored(app, '5', '{"id":5,"name":"a"}', current)
    })
  })

  it('answers PUT and PATCH with 401 without credentials and 403 with read-only ones, whatever the body, changing nothing', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: [`name=reader;scopes=plants:read;${READER_SECRET}`, TEST_TOKEN] })
    const entityTag = await stored(app, '5', { name: 'kept' })
    const reader = bearer(READER_SECRET)
    const anonymous = (method: 'PUT' | 'PATCH', id: string) => app.inject({
      method, url: `/plants/${id}`, headers: { 'content-type': 'text/plain', 'if-match': 'abc' }, payload: '{"name":'
    })

    for (const response of [await anonymous('PUT', '5'), await anonymous('PATCH', '5'), await anonymous('PUT', '6')]) {
      expectError(response, 401, 'this operation needs an "Authorization: Bearer <token>" header')
      expect(response.headers['www-authenticate']).toBe('Bearer realm="plantstore"')
    }
    const forbidden = [
      await put(app, '5', { name: 'b' }, reader),
      await put(app, '6', '{"name":', reader),
      await patch(app, '5', { name: 'b' }, reader),
      await patch(app, '5', '{"name":', { ...reader, 'content-type': 'application/json' })
    ]
    for (const response of forbidden) {
      expectError(response, 403, 'this token lacks the scope "plants:write", which this operation needs')
      expect(response.headers['www-authenticate']).toBe('Bearer realm="plantstore", error="insufficient_scope", scope="plants:write"')
    }

    expect(expectPlant(await get(app, '5', reader), 200, '{"id":5,"name":"kept"}')).toBe(entityTag)
    await expectAbsent(app, '6')
  })
})
