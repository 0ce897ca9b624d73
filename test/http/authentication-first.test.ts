import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { bearer, buildTestApp, expectError, TEST_TOKEN } from '../helpers/app.js'

const ADMIN_TOKEN = 'plantstore-admin-token-c41e07'
const TOKENS = [`name=ops;scopes=admin;${ADMIN_TOKEN}`, TEST_TOKEN]
const CHALLENGE = 'Bearer realm="plantstore"'
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'
const ADMIN_SCOPE_CHALLENGE = 'Bearer realm="plantstore", error="insufficient_scope", scope="admin"'

/** Fixed in CI; `FUZZ_SEED` and `FUZZ_RUNS` give a longer or different run on demand. */
const FUZZ = { seed: Number(process.env.FUZZ_SEED ?? 20261126), numRuns: Number(process.env.FUZZ_RUNS ?? 400) }

const URL_CHARACTERS = 'abcXYZ019-_~!$&\'()*+,;=:@/%?'
const segment = fc.oneof(
  fc.string({ unit: fc.constantFrom(...URL_CHARACTERS), maxLength: 40 }),
  fc.integer({ min: 101, max: 4000 }).map((length) => '7'.repeat(length)),
  fc.integer({ min: 101, max: 2000 }).map((length) => 'é'.repeat(length).replace(/é/g, '%C3%A9')),
  // (No dot segments: app.inject resolves them as a client would, out of the guarded scope.)
  fc.constantFrom('%zz', '%', '%%', '%E0%A4%A', '%C3', '%ff%fe', '%00', '%2F')
)
const query = fc.oneof(
  fc.constant(''),
  fc.string({ unit: fc.constantFrom(...URL_CHARACTERS), maxLength: 60 }).map((text) => `?${text}`),
  fc.constantFrom('?limit=%zz', '?after=' + '9'.repeat(500), '?limit=1&limit=2', '?%zz=1')
)
const method = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND', 'SEARCH')
/** Under /plants and /admin, always below a path segment boundary. */
const plantsPath = fc.tuple(fc.constantFrom('/plants', '/plants/1'), fc.array(segment, { minLength: 1, maxLength: 3 }), query)
  .map(([base, segments, tail]) => `${base}/${segments.join('/')}${tail}`)
const adminPath = fc.tuple(fc.constantFrom('/admin', '/admin/tokens', '/admin/webhooks', '/admin/export', '/%61dmin/tokens'),
  fc.array(segment, { minLength: 1, maxLength: 3 }), query)
  .map(([base, segments, tail]) => `${base}/${segments.join('/')}${tail}`)

describe('Authentication comes first, whatever else is wrong with the request', () => {
  it('answers every malformed /plants and /admin request without a token with a 401 and the exact challenge', async () => {
    const app = await buildTestApp({ tokens: TOKENS })

    await fc.assert(fc.asyncProperty(method, fc.oneof(plantsPath, adminPath), async (verb, url) => {
      const response = await app.inject({ method: verb as 'GET', url })

      expect({ url, status: response.statusCode }).toEqual({ url, status: 401 })
      expect(response.headers['www-authenticate']).toBe(CHALLENGE)
    }), FUZZ)
  })

  it('answers them with an unknown token with a 401 and error="invalid_token"', async () => {
    const app = await buildTestApp({ tokens: TOKENS })

    await fc.assert(fc.asyncProperty(method, fc.oneof(plantsPath, adminPath), async (verb, url) => {
      const response = await app.inject({ method: verb as 'GET', url, headers: bearer('not-a-token-we-know') })

      expect({ url, status: response.statusCode }).toEqual({ url, status: 401 })
      expect(response.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
    }), FUZZ)
  })

  it('answers every malformed /admin request with a token without the admin scope with a 403', async () => {
    const app = await buildTestApp({ tokens: TOKENS })

    await fc.assert(fc.asyncProperty(method, adminPath, async (verb, url) => {
      const response = await app.inject({ method: verb as 'GET', url, headers: bearer() })

      expect({ url, status: response.statusCode }).toEqual({ url, status: 403 })
      expect(response.headers['www-authenticate']).toBe(ADMIN_SCOPE_CHALLENGE)
    }), FUZZ)
  })

  it.each([
    ['an overlong segment', `/plants/${'1'.repeat(120)}`],
    ['an undecodable segment', '/plants/%zz'],
    ['an undecodable and overlong path', `/plants/%zz/${'1'.repeat(120)}`]
  ])('answers %s under /plants without a token with a 401, not a 400 or a 414', async (_case, url) => {
    const app = await buildTestApp()

    const response = await app.inject({ method: 'GET', url })

    expectError(response, 401, 'this operation needs an "Authorization: Bearer <token>" header')
    expect(response.headers['www-authenticate']).toBe(CHALLENGE)
  })

  it.each([
    ['/plants with a valid token', `/plants/${'1'.repeat(120)}`, bearer()],
    ['/admin/tokens with an admin token', `/admin/tokens/${'a'.repeat(101)}`, bearer(ADMIN_TOKEN)],
    ['/admin/webhooks with an admin token', `/admin/webhooks/${'a'.repeat(3000)}/deliveries`, bearer(ADMIN_TOKEN)]
  ])('answers an overlong segment under %s with a 414 Error', async (_case, url, headers) => {
    const app = await buildTestApp({ tokens: TOKENS })

    expectError(await app.inject({ method: 'GET', url, headers }), 414, 'a path segment of the request URL is too long')
  })

  it('answers an undecodable URL with a valid token with a 400 Error', async () => {
    const app = await buildTestApp()

    expectError(await app.inject({ method: 'DELETE', url: '/plants/%zz?x=1', headers: bearer() }), 400, 'the request URL is malformed')
  })

  it('keeps the open paths open: an unknown or undecodable path outside /plants and /admin needs no token', async () => {
    const app = await buildTestApp()

    expectError(await app.inject({ method: 'GET', url: '/nowhere/%zz' }), 400, 'the request URL is malformed')
    expectError(await app.inject({ method: 'GET', url: `/nowhere/${'1'.repeat(200)}` }), 404, `no route GET /nowhere/${'1'.repeat(200)}`)
    expect((await app.inject({ method: 'GET', url: '/healthz?x=%zz' })).statusCode).toBe(200)
  })
})
