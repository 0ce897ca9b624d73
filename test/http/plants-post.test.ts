import { Readable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, expectError, expectNothingStored, postPlant, sharedTestApp } from '../helpers/app.js'

// One app per backend for the file (the BODY_LIMIT test builds its own): each test uses ids no other
// test uses, and a test that proves an id unused leaves it unused.
describe.each(backends)('POST /plants on $name', (backend) => {
  const shared = sharedTestApp(backend)

  describe('when the id is new', () => {
    it('then it answers 200 with name and tag only, JSON, a Location and a request id', async () => {
      const app = shared()

      const response = await postPlant(app, { id: 10, name: 'Monstera deliciosa', tag: 'tropical' })

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"name":"Monstera deliciosa","tag":"tropical"}')
      expect(response.headers.location).toBe('/plants/10')
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
    })

    it('then a plant without a tag comes back without a tag', async () => {
      const app = shared()

      const response = await postPlant(app, { id: 11, name: 'Ficus' })

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"name":"Ficus"}')
    })

    it('then an empty tag is kept as an empty tag', async () => {
      const app = shared()

      const response = await postPlant(app, { id: 12, name: 'Ficus', tag: '' })

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"name":"Ficus","tag":""}')
    })

    it('then unknown properties are accepted, not stored and not echoed', async () => {
      const app = shared()

      const first = await postPlant(app, { id: 13, name: 'Fern', colour: 'green', nested: { a: [1, 2] } })
      const retryWithOtherExtras = await postPlant(app, { id: 13, name: 'Fern', height: 30 })

      expect(first.statusCode).toBe(200)
      expect(first.body).toBe('{"name":"Fern"}')
      expect(retryWithOtherExtras.statusCode).toBe(200)
      expect(retryWithOtherExtras.body).toBe('{"name":"Fern"}')
      const stored = await app.inject({ method: 'GET', url: '/plants/13', headers: bearer() })
      expect(stored.body).toBe('{"id":13,"name":"Fern"}')
    })

    it('then a negative id gets its own Location', async () => {
      const app = shared()

      const response = await postPlant(app, { id: -42, name: 'Cactus' })

      expect(response.statusCode).toBe(200)
      expect(response.headers.location).toBe('/plants/-42')
    })

    it('then a leading byte order mark is ignored', async () => {
      const app = shared()
      const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"id":15,"name":"Basil"}')])

      const response = await app.inject({
        method: 'POST', url: '/plants', headers: { 'content-type': 'application/json', ...bearer() }, payload: body
      })

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"name":"Basil"}')
    })

    it('then a name holding U+FFFD, the replacement character itself, is valid UTF-8 and kept', async () => {
      const app = shared()

      const response = await postPlant(app, '{"id":16,"name":"Mint \uFFFD �"}')

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"name":"Mint � �"}')
    })

    it('then a name and a tag that JSON escapes come back escaped as JSON.stringify escapes them', async () => {
      const app = shared()
      const name = 'say "hi" \\ \u0001\t\n 🌵 \u2028'
      const tag = '\u001f"'

      const response = await postPlant(app, { id: 17, name, tag })

      expect(response.statusCode).toBe(200)
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(response.body).toBe(`{"name":${JSON.stringify(name)},"tag":${JSON.stringify(tag)}}`)
    })

    it('then Content-Type parameters such as charset=utf-8 are fine', async () => {
      const app = shared()

      const response = await postPlant(app, { id: 14, name: 'Aloe' }, { 'content-type': 'application/json; charset=UTF-8' })

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"name":"Aloe"}')
    })
  })

  describe('when the same id arrives again', () => {
    it('then the same name and tag is a replay: the same 200, body and Location', async () => {
      const app = shared()
      const first = await postPlant(app, { id: 20, name: 'Orchid', tag: 'flower' })

      const retry = await postPlant(app, { id: 20, name: 'Orchid', tag: 'flower' })

      expect(retry.statusCode).toBe(200)
      expect(retry.body).toBe(first.body)
      expect(retry.headers.location).toBe('/plants/20')
    })

    it('then another name is a 409 and the first plant stays', async () => {
      const app = shared()
      await postPlant(app, { id: 21, name: 'Orchid', tag: 'flower' })

      const conflict = await postPlant(app, { id: 21, name: 'Tulip', tag: 'flower' })
      const original = await postPlant(app, { id: 21, name: 'Orchid', tag: 'flower' })

      expectError(conflict, 409, 'plant 21 already exists with a different name or tag')
      expect(conflict.headers.location).toBeUndefined()
      expect(original.statusCode).toBe(200)
    })

    it('then another tag is a 409', async () => {
      const app = shared()
      await postPlant(app, { id: 22, name: 'Orchid', tag: 'flower' })

      expectError(await postPlant(app, { id: 22, name: 'Orchid', tag: 'Flower' }), 409,
        'plant 22 already exists with a different name or tag')
    })

    it('then an absent tag and an empty tag are different plants', async () => {
      const app = shared()
      await postPlant(app, { id: 23, name: 'Orchid' })

      const withEmptyTag = await postPlant(app, { id: 23, name: 'Orchid', tag: '' })

      expectError(withEmptyTag, 409, 'plant 23 already exists with a different name or tag')
    })
  })

  describe('when the body is not a JSON object', () => {
    it.each([
      ['truncated JSON', '{"id":1,"name":"a"', "request body is not valid JSON: expected '}' at position 18"],
      ['a raw control character in a string', '{"id":1,"name":"a\u0001"}', 'request body is not valid JSON: invalid string (a bad escape or a raw control character) at position 15'],
      ['a JSON array', '[{"id":1,"name":"a"}]', 'request body must be a JSON object'],
      ['JSON null', 'null', 'request body must be a JSON object'],
      ['a JSON string', '"plant"', 'request body must be a JSON object'],
      ['an empty body', '', 'request body is empty; send a JSON object as application/json'],
      ['a body of white space only', ' \r\n', 'request body is empty; send a JSON object as application/json'],
      ['trailing text', '{"id":1,"name":"a"} x', /^request body is not valid JSON/],
      ['a big id in truncated JSON', '{"id":9007199254740993,"name":"a"', /^request body is not valid JSON/]
    ])('then %s is a 400', async (_case, body, message) => {
      const app = shared()

      expectError(await postPlant(app, body), 400, message)
      await expectNothingStored(app, '1')
    })

    it.each([
      ['a broken two-byte sequence', [0xc3, 0x28]],
      ['a broken sequence next to a genuine U+FFFD', [0xef, 0xbf, 0xbd, 0xc3, 0x28]],
      ['an overlong encoding', [0xc0, 0xaf]],
      ['an encoded surrogate', [0xed, 0xa0, 0x80]]
    ])('then a body that is not valid UTF-8 (%s) is a 400', async (_case, bytes) => {
      const app = shared()
      const body = Buffer.concat([Buffer.from('{"id":1,"name":"'), Buffer.from(bytes), Buffer.from('"}')])

      const response = await app.inject({
        method: 'POST', url: '/plants', headers: { 'content-type': 'application/json', ...bearer() }, payload: body
      })

      expectError(response, 400, 'request body is not valid UTF-8')
      await expectNothingStored(app, '1')
    })

    it.each([
      ['__proto__', '{"id":5,"name":"a","__proto__":{"polluted":true}}', '{"id":5,"name":"a"}'],
      ['constructor.prototype', '{"id":6,"name":"a","constructor":{"prototype":{"polluted":true}}}', '{"id":6,"name":"a"}'],
      ['constructor and prototype', '{"id":7,"name":"a","constructor":"x","prototype":{"polluted":true}}', '{"id":7,"name":"a"}'],
      ['__proto__ next to a big id', '{"id":9007199254740993,"name":"a","__proto__":{"polluted":true},"tag":"t"}',
        '{"id":9007199254740993,"name":"a","tag":"t"}']
    ])('then a %s key is ignored like any unknown key, and reaches no prototype', async (_case, body, storedPlant) => {
      const app = shared()
      const { id, ...plant } = JSON.parse(storedPlant.replace(/(\d{16,})/, '"$1"')) as Record<string, unknown>

      const response = await postPlant(app, body)
      const stored = await app.inject({ method: 'GET', url: `/plants/${String(id)}`, headers: bearer() })

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe(JSON.stringify(plant))
      expect(stored.body).toBe(storedPlant)
      expect(({} as Record<string, unknown>).polluted).toBeUndefined()
      expect(Object.prototype).not.toHaveProperty('polluted')
    })
  })

  describe('when a key repeats', () => {
    it('then the last occurrence counts, for storage', async () => {
      const app = shared()

      const response = await postPlant(app, '{"id":30,"name":"first","name":"last"}')
      const replayOfLast = await postPlant(app, { id: 30, name: 'last' })

      expect(response.body).toBe('{"name":"last"}')
      expect(replayOfLast.statusCode).toBe(200)
    })

    it('then the last occurrence counts, for validation', async () => {
      const app = shared()

      expectError(await postPlant(app, '{"id":31,"name":"ok","name":5}'), 400, 'name must be a string')
      expectError(await postPlant(app, '{"id":9007199254740993,"id":"x","name":"a"}'), 400,
        'id must be an integer from -9223372036854775808 to 9223372036854775807')
      await expectNothingStored(app, '31')
    })
  })

  describe('when the media type is not JSON', () => {
    it.each([
      ['text/plain', { 'content-type': 'text/plain' }],
      ['application/x-www-form-urlencoded', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['application/xml', { 'content-type': 'application/xml' }],
      ['a JSON look-alike', { 'content-type': 'application/jsonx' }]
    ])('then %s is a 415', async (_case, headers) => {
      const app = shared()

      expectError(await postPlant(app, { id: 40, name: 'a' }, headers), 415, 'Content-Type must be application/json')
      await expectNothingStored(app, '40')
    })

    it('then a body without a Content-Type is a 415', async () => {
      const app = shared()

      const response = await app.inject({ method: 'POST', url: '/plants', headers: bearer(), payload: '{"id":41,"name":"a"}' })

      expectError(response, 415, 'Content-Type must be application/json')
      await expectNothingStored(app, '41')
    })

    it('then a charset other than UTF-8 is a 415', async () => {
      const app = shared()

      const response = await postPlant(app, { id: 42, name: 'a' }, { 'content-type': 'application/json; charset=latin1' })

      expectError(response, 415, 'application/json bodies must be UTF-8')
      await expectNothingStored(app, '42')
    })

    it.each(['gzip', 'br', 'deflate', 'identity'])('then Content-Encoding %s is a 415', async (encoding) => {
      const app = shared()

      const response = await postPlant(app, { id: 43, name: 'a' }, { 'content-encoding': encoding })

      expectError(response, 415, 'request bodies must not be content-encoded; send plain application/json')
      await expectNothingStored(app, '43')
    })
  })

  describe('when the body is large', () => {
    /** A plant of `bytes` bytes, padded with spaces; 51 and up are the ids of the tests that expect nothing stored. */
    const sized = (bytes: number, id = 50) => {
      const json = `{"id":${id},"name":"big"}`
      return json.slice(0, -1) + ' '.repeat(bytes - json.length) + '}'
    }

    it('then exactly the limit is fine', async () => {
      const app = shared()

      const response = await postPlant(app, sized(16384))

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"name":"big"}')
    })

    it('then one byte over the limit is a 413', async () => {
      const app = shared()

      expectError(await postPlant(app, sized(16385, 51)), 413, 'request body is larger than 16384 bytes')
      await expectNothingStored(app, '51')
    })

    it('then a chunked body over the limit is a 413 too', async () => {
      const app = shared()
      const body = Readable.from([sized(16385, 52).slice(0, 10_000), sized(16385, 52).slice(10_000)].map((s) => Buffer.from(s)))

      const response = await app.inject({
        method: 'POST', url: '/plants', headers: { 'content-type': 'application/json', ...bearer() }, payload: body
      })

      expectError(response, 413, 'request body is larger than 16384 bytes')
      await expectNothingStored(app, '52')
    })

    it('then a content-encoded body over the limit is a 415, refused before it is read', async () => {
      const app = shared()

      const response = await postPlant(app, sized(20_000, 53), { 'content-encoding': 'gzip' })

      expectError(response, 415, 'request bodies must not be content-encoded; send plain application/json')
    })

    it('then the limit follows BODY_LIMIT', async () => {
      const app = await buildTestApp({ store: await backend.open(), config: { bodyLimit: 64 } })

      expectError(await postPlant(app, sized(65)), 413, 'request body is larger than 64 bytes')
      expect((await postPlant(app, sized(64))).statusCode).toBe(200)
    })
  })
})
