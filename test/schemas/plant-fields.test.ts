import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { backends, bearer, expectError, expectNothingStored, postPlant, sharedTestApp, withoutPlants } from '../helpers/app.js'

const ID_RULE = 'id must be an integer from -9223372036854775808 to 9223372036854775807'

// One app per backend for the file: each test uses ids of its own, or first deletes the int64 edge it needs.
describe.each(backends)('NewPlant field rules on $name', (backend) => {
  const shared = sharedTestApp(backend)
  let lastId = 1000
  /** An id no other test of this backend's suite uses. */
  const ownId = () => ++lastId

  describe('id', () => {
    it.each([
      ['the smallest int64', '-9223372036854775808', '/plants/-9223372036854775808'],
      ['the largest int64', '9223372036854775807', '/plants/9223372036854775807'],
      ['2^53 + 1, which a double would round', '9007199254740993', '/plants/9007199254740993'],
      ['zero', '0', '/plants/0'],
      ['minus zero', '-0', '/plants/0'],
      ['1.0, an integer in JSON Schema terms', '1.0', '/plants/1'],
      ['1e2, an integer in exponent form', '1e2', '/plants/100'],
      ['the largest int64 with a fraction of zeros', '9223372036854775807.000', '/plants/9223372036854775807'],
      ['the largest int64 in exponent form', '92233720368547758.07e2', '/plants/9223372036854775807'],
      ['a long integer with a negative exponent', '12300e-2', '/plants/123']
    ])('accepts %s exactly', async (_case, literal, location) => {
      const app = await withoutPlants(shared(), location.slice('/plants/'.length))

      const response = await postPlant(app, `{"id":${literal},"name":"Fern"}`)

      expect(response.statusCode).toBe(200)
      expect(response.headers.location).toBe(location)
    })

    it('keeps 2^53 and 2^53 + 1 apart', async () => {
      const app = await withoutPlants(shared(), '9007199254740992', '9007199254740993')
      await postPlant(app, '{"id":9007199254740992,"name":"even"}')

      const neighbour = await postPlant(app, '{"id":9007199254740993,"name":"odd"}')
      const conflictOnExactValue = await postPlant(app, '{"id":9007199254740993,"name":"even"}')

      expect(neighbour.statusCode).toBe(200)
      expectError(conflictOnExactValue, 409, 'plant 9007199254740993 already exists with a different name or tag')
    })

    it.each([
      ['one above the largest int64', '9223372036854775808'],
      ['one below the smallest int64', '-9223372036854775809'],
      ['2^64', '18446744073709551616'],
      ['a huge exponent', '1e400'],
      ['an exponent just past int64', '9.3e18'],
      ['a fraction', '1.5'],
      ['a fraction a double rounds to an integer', '1.00000000000000000001'],
      ['a tiny exponent', '1e-400'],
      ['a string of digits', '"5"'],
      ['true', 'true'],
      ['null', 'null'],
      ['an object', '{"value":5}'],
      ['an array', '[5]']
    ])('refuses %s', async (_case, literal) => {
      const app = shared()

      expectError(await postPlant(app, `{"id":${literal},"name":"Fern"}`), 400, ID_RULE)
    })

    it('is required', async () => {
      const app = shared()

      expectError(await postPlant(app, { name: 'Fern' }), 400, 'id is required')
    })
  })

  describe.each([
    ['name', 1, {}],
    ['tag', 0, { name: 'Fern' }]
  ] as const)('%s', (field, minLength, base) => {
    const post = (app: FastifyInstance, id: number, value: unknown) =>
      postPlant(app, { id, ...base, [field]: value })

    it('counts length in code points: 256 astral characters fit, 257 do not', async () => {
      const app = shared()
      const id = ownId()
      const seedling = '\u{1F331}'

      const fits = await post(app, id, seedling.repeat(256))
      const tooLong = await post(app, id, seedling.repeat(257))

      expect(fits.statusCode).toBe(200)
      expect(fits.json()[field]).toBe(seedling.repeat(256))
      expectError(tooLong, 400, `${field} must be at most 256 characters long`)
    })

    it('accepts 256 ASCII characters and refuses 257', async () => {
      const app = shared()
      const id = ownId()

      expect((await post(app, id, 'x'.repeat(256))).statusCode).toBe(200)
      expectError(await post(app, id, 'y'.repeat(257)), 400, `${field} must be at most 256 characters long`)
    })

    it.each([
      ['U+0000', 'a\u0000b'],
      ['a lone high surrogate', 'a\uD83Cb'],
      ['a lone low surrogate', 'a\uDF31b'],
      ['reversed surrogates', '\uDF31\uD83C']
    ])('refuses %s', async (_case, value) => {
      const app = shared()
      const id = ownId()

      expectError(await post(app, id, value), 400, `${field} must not contain U+0000 or unpaired surrogates`)
      await expectNothingStored(app, String(id))
    })

    it.each([
      ['null', null],
      ['a number', 123],
      ['a boolean', false],
      ['an array', ['Fern']]
    ])('refuses %s without coercing it', async (_case, value) => {
      const app = shared()
      const id = ownId()

      expectError(await post(app, id, value), 400, `${field} must be a string`)
      await expectNothingStored(app, String(id))
    })

    it('keeps text exactly: no trimming, no case folding, no normalisation', async () => {
      const app = shared()
      const id = ownId()
      const decomposed = ' Cafe\u0301 FERN '

      const created = await post(app, id, decomposed)
      const composed = await post(app, id, ' Caf\u00e9 FERN ')
      const stored = await app.inject({ method: 'GET', url: `/plants/${id}`, headers: bearer() })

      expect(created.json()[field]).toBe(decomposed)
      expect(composed.statusCode).toBe(409)
      expect(stored.json()[field]).toBe(decomposed)
    })

    if (minLength === 1) {
      it('refuses an empty name', async () => {
        const app = shared()
        const id = ownId()

        expectError(await post(app, id, ''), 400, 'name must be at least 1 character long')
      })

      it('is required', async () => {
        const app = shared()
        const id = ownId()

        expectError(await postPlant(app, { id }), 400, 'name is required')
      })
    }
  })
})
