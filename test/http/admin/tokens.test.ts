import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describe, expect, it } from 'vitest'
import { digestToken } from '../../../src/auth/tokens.js'
import { backends, bearer, buildTestApp, expectError, expectNothingStored, memoryBackend, postPlant, sharedTestApp, TEST_TOKEN } from '../../helpers/app.js'

const ADMIN_TOKEN = 'access-tokens-admin-token-0c41'
const READ_TOKEN = 'access-tokens-read-token-77b2'
const WRITE_TOKEN = 'access-tokens-write-token-9e03'
const ENVIRONMENT_TOKENS = [
  `name=ops;scopes=admin;${ADMIN_TOKEN}`,
  `name=dashboard;scopes=plants:read;${READ_TOKEN}`,
  `scopes=plants:write;name=importer;${WRITE_TOKEN}`,
  TEST_TOKEN
]

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const INVALID_TOKEN = 'the bearer token is missing, malformed or not accepted'
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'
const NO_CREDENTIALS = 'this operation needs an "Authorization: Bearer <token>" header'

function expectInsufficientScope (response: LightMyRequestResponse, scope: string): void {
  expectError(response, 403, `this token lacks the scope "${scope}", which this operation needs`)
  expect(response.headers['www-authenticate']).toBe(`Bearer realm="plantstore", error="insufficient_scope", scope="${scope}"`)
}

const createToken = (app: FastifyInstance, body: unknown, token = ADMIN_TOKEN) => app.inject({
  method: 'POST',
  url: '/admin/tokens',
  headers: { ...bearer(token), 'content-type': 'application/json' },
  payload: typeof body === 'string' ? body : JSON.stringify(body)
})
const listTokens = (app: FastifyInstance, token = ADMIN_TOKEN) => app.inject({ method: 'GET', url: '/admin/tokens', headers: bearer(token) })
const revokeToken = (app: FastifyInstance, id: string, token = ADMIN_TOKEN) =>
  app.inject({ method: 'DELETE', url: `/admin/tokens/${encodeURIComponent(id)}`, headers: bearer(token) })
const getPlants = (app: FastifyInstance, token: string) => app.inject({ method: 'GET', url: '/plants', headers: bearer(token) })

/** Creates a token and returns its body; fails the test unless it was created. */
async function madeToken (app: FastifyInstance, body: Record<string, unknown>): Promise<{ id: string, token: string, name: string }> {
  const response = await createToken(app, body)
  expect(response.statusCode).toBe(201)
  return response.json()
}

describe('Scopes', () => {
  const build = () => buildTestApp({ tokens: ENVIRONMENT_TOKENS })
  // For the tests that are refused or find no route: nothing they send is stored.
  const shared = sharedTestApp(memoryBackend, { tokens: ENVIRONMENT_TOKENS })

  it.each([
    ['GET /plants', 'GET', '/plants', undefined, 200],
    ['GET /plants/{id}', 'GET', '/plants/1', undefined, 404],
    ['HEAD /plants', 'HEAD', '/plants', undefined, 200],
    ['POST /plants', 'POST', '/plants', '{"id":1,"name":"Fern"}', 200],
    ['DELETE /plants/{id}', 'DELETE', '/plants/1', undefined, 404],
    ['GET /admin/tokens', 'GET', '/admin/tokens', undefined, 200],
    ['POST /admin/tokens', 'POST', '/admin/tokens', '{"name":"x","scopes":["admin"]}', 201],
    ['GET /admin/tokens/{id}', 'GET', '/admin/tokens/env:ops', undefined, 200],
    ['DELETE /admin/tokens/{id}', 'DELETE', '/admin/tokens/env:ops', undefined, 409]
  ] as const)('%s is granted exactly by its scope', async (_case, method, url, payload, grantedStatus) => {
    const app = await build()
    const needed = url.startsWith('/admin') ? 'admin' : method === 'GET' || method === 'HEAD' ? 'plants:read' : 'plants:write'
    const tokens = { admin: ADMIN_TOKEN, 'plants:read': READ_TOKEN, 'plants:write': WRITE_TOKEN } as const

    for (const [scope, token] of Object.entries(tokens)) {
      const response = await app.inject({
        method, url, headers: bearer(token), ...(payload === undefined ? {} : { payload, headers: { ...bearer(token), 'content-type': 'application/json' } })
      })
      if (scope === needed) {
        expect(response.statusCode, `${scope} on ${method} ${url}`).toBe(grantedStatus)
        expect(response.headers['www-authenticate']).toBeUndefined()
      } else if (method === 'HEAD') {
        expect(response.statusCode).toBe(403)
        expect(response.headers['www-authenticate']).toBe(`Bearer realm="plantstore", error="insufficient_scope", scope="${needed}"`)
      } else {
        expectInsufficientScope(response, needed)
      }
    }
  })

  it('write does not imply read, nor admin the plant routes', async () => {
    const app = await build()

    expectInsufficientScope(await getPlants(app, WRITE_TOKEN), 'plants:read')
    expectInsufficientScope(await getPlants(app, ADMIN_TOKEN), 'plants:read')
    expectInsufficientScope(await postPlant(app, { id: 1, name: 'Fern' }, bearer(READ_TOKEN)), 'plants:write')
    await expectNothingStored(app, '1')
  })

  it.each([
    ['a body that is not JSON', { method: 'POST', url: '/plants', payload: '{"id":' }, READ_TOKEN, 'plants:write'],
    ['a body over the limit', { method: 'POST', url: '/plants', payload: `{"id":1,"name":"${'x'.repeat(20_000)}"}` }, READ_TOKEN, 'plants:write'],
    ['a bad path value', { method: 'GET', url: '/plants/abc' }, WRITE_TOKEN, 'plants:read'],
    ['a bad query value', { method: 'GET', url: '/plants?limit=0' }, WRITE_TOKEN, 'plants:read'],
    ['an unknown path below /plants', { method: 'GET', url: '/plants/1/leaves' }, WRITE_TOKEN, 'plants:read'],
    ['an unknown path below /admin', { method: 'GET', url: '/admin/nothing' }, READ_TOKEN, 'admin'],
    ['a method /admin/tokens does not have', { method: 'PUT', url: '/admin/tokens' }, READ_TOKEN, 'admin'],
    ['a bad token body', { method: 'POST', url: '/admin/tokens', payload: '{"name":"has space"}' }, WRITE_TOKEN, 'admin']
  ] as const)('the scope is checked before the rest: %s without the scope is a 403', async (_case, request, token, scope) => {
    const app = shared()

    const response = await app.inject({ ...request, headers: { ...bearer(token), 'content-type': 'application/json' } })

    expectInsufficientScope(response, scope)
  })

  it.each([
    ['no token', {}, 401, NO_CREDENTIALS],
    ['an unknown token', bearer('not-a-known-token'), 401, INVALID_TOKEN],
    ['a token without admin', bearer(READ_TOKEN), 403, 'this token lacks the scope "admin", which this operation needs'],
    ['the admin token', bearer(ADMIN_TOKEN), 404, 'no route GET /admin/nothing']
  ])('under /admin authentication comes first, then the scope, then the route: %s', async (_case, headers, status, message) => {
    const app = shared()

    const response = await app.inject({ method: 'GET', url: '/admin/nothing', headers })

    expectError(response, status, message)
  })

  it('answers a method /admin/tokens lacks with 405 and Allow for an admin token', async () => {
    const app = shared()

    const response = await app.inject({ method: 'PUT', url: '/admin/tokens', headers: bearer(ADMIN_TOKEN) })

    expectError(response, 405, '/admin/tokens does not support PUT; allowed: GET, HEAD, POST')
    expect(response.headers.allow).toBe('GET, HEAD, POST')
  })

  it('lets a method /plants lacks (405) through with any valid token: it needs no scope', async () => {
    const app = shared()

    const response = await app.inject({ method: 'OPTIONS', url: '/plants', headers: bearer(ADMIN_TOKEN) })

    expectError(response, 405, '/plants does not support OPTIONS; allowed: GET, HEAD, POST')
  })
})

describe.each(backends)('The token admin API on $name', (backend) => {
  const build = async () => buildTestApp({ store: await backend.open(), tokens: ENVIRONMENT_TOKENS })
  // One app for the tests that make and read tokens of their own, each under a name no other test uses;
  // one for the refused creations, where nothing is ever stored, so each can count the list. A test that
  // lists every token builds its own.
  const ownTokens = sharedTestApp(backend, { tokens: ENVIRONMENT_TOKENS })
  const refusals = sharedTestApp(backend, { tokens: ENVIRONMENT_TOKENS })

  it('creates a token, shows it once, and the new token works at once with exactly its scopes', async () => {
    const app = ownTokens()
    const before = Date.now()

    const response = await createToken(app, { name: 'grafana-dashboard', scopes: ['plants:read'], ignored: true })

    expect(response.statusCode).toBe(201)
    const body = response.json()
    expect(body).toEqual({
      id: expect.stringMatching(UUID),
      name: 'grafana-dashboard',
      scopes: ['plants:read'],
      createdAt: expect.stringMatching(ISO_TIME),
      token: expect.stringMatching(/^pst_[A-Za-z0-9_-]{43}$/)
    })
    expect(Object.keys(body)).toEqual(['id', 'name', 'scopes', 'createdAt', 'token'])
    expect(Date.parse(body.createdAt)).toBeGreaterThanOrEqual(before - 1)
    expect(response.headers.location).toBe(`/admin/tokens/${body.id}`)
    expect(response.headers['cache-control']).toBe('no-store')
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
    expect((await getPlants(app, body.token)).statusCode).toBe(200)
    expectInsufficientScope(await postPlant(app, { id: 1, name: 'Fern' }, bearer(body.token)), 'plants:write')
  })

  it('accepts a name of exactly 64 characters using every allowed kind, keeps it whole, and holds it against a second token', async () => {
    const app = ownTokens()
    const name = `Az09._-${'n'.repeat(57)}`

    const created = await createToken(app, { name, scopes: ['plants:read'] })
    const again = await createToken(app, { name, scopes: ['admin'] })
    const shown = await app.inject({ method: 'GET', url: `/admin/tokens/${created.json().id}`, headers: bearer(ADMIN_TOKEN) })

    expect(name).toHaveLength(64)
    expect(created.statusCode).toBe(201)
    expect(created.json()).toMatchObject({ name, scopes: ['plants:read'] })
    expect(shown.json()).toMatchObject({ name, source: 'store' })
    expectError(again, 409, `a live access token is already named "${name}"; revoke it or choose another name`)
  })

  it('stores scopes in their canonical order and keeps an expiry, normalised to UTC', async () => {
    const app = ownTokens()
    const expiresAt = new Date(Date.now() + 86_400_000)
    const offset = `${expiresAt.toISOString().slice(0, 19)}+00:00`

    const created = (await createToken(app, { name: 'deploy', scopes: ['admin', 'plants:write', 'plants:read'], expiresAt: offset })).json()
    const listed = (await app.inject({ method: 'GET', url: `/admin/tokens/${created.id}`, headers: bearer(ADMIN_TOKEN) })).json()

    expect(created.scopes).toEqual(['plants:read', 'plants:write', 'admin'])
    expect(created.expiresAt).toBe(`${expiresAt.toISOString().slice(0, 19)}.000Z`)
    expect(listed).toEqual({
      id: created.id, name: 'deploy', scopes: ['plants:read', 'plants:write', 'admin'], source: 'store', createdAt: created.createdAt, expiresAt: created.expiresAt
    })
  })

  it('lists stored and environment tokens newest first, without tokens or digests', async () => {
    const app = await build()
    const first = await madeToken(app, { name: 'first', scopes: ['plants:read'] })
    await sleep(5)
    const second = await madeToken(app, { name: 'second', scopes: ['plants:write'] })

    const response = await listTokens(app)

    expect(response.statusCode).toBe(200)
    expect(response.headers['cache-control']).toBe('no-store')
    const listed = response.json() as Array<Record<string, unknown>>
    expect(listed.map((token) => [token.name, token.source])).toEqual([
      ['second', 'store'], ['first', 'store'], ['ops', 'environment'], ['dashboard', 'environment'], ['importer', 'environment'], ['environment-4', 'environment']
    ])
    expect(listed[0]).toEqual({ id: second.id, name: 'second', scopes: ['plants:write'], source: 'store', createdAt: expect.stringMatching(ISO_TIME) })
    expect(listed[2]).toEqual({ id: 'env:ops', name: 'ops', scopes: ['admin'], source: 'environment', createdAt: expect.stringMatching(ISO_TIME) })
    expect(listed[5]).toMatchObject({ id: 'env:environment-4', scopes: ['plants:read', 'plants:write'] })
    for (const secret of [first.token, second.token, ADMIN_TOKEN, digestToken(first.token).toString('hex'), digestToken(ADMIN_TOKEN).toString('hex')]) {
      expect(response.body).not.toContain(secret)
    }
  })

  it('revokes a token: 204, the next request with it is a 401, and the listing shows when', async () => {
    const app = ownTokens()
    const made = await madeToken(app, { name: 'leaked', scopes: ['plants:read'] })
    expect((await getPlants(app, made.token)).statusCode).toBe(200)

    const revoked = await revokeToken(app, made.id)
    const refused = await getPlants(app, made.token)
    const again = await revokeToken(app, made.id)
    const listed = (await app.inject({ method: 'GET', url: `/admin/tokens/${made.id}`, headers: bearer(ADMIN_TOKEN) })).json()
    const relisted = (await app.inject({ method: 'GET', url: `/admin/tokens/${made.id}`, headers: bearer(ADMIN_TOKEN) })).json()

    expect(revoked.statusCode).toBe(204)
    expect(revoked.body).toBe('')
    expectError(refused, 401, INVALID_TOKEN)
    expect(refused.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
    expect(again.statusCode).toBe(204)
    expect(listed).toMatchObject({ name: 'leaked', source: 'store', revokedAt: expect.stringMatching(ISO_TIME) })
    expect(relisted.revokedAt).toBe(listed.revokedAt)
  })

  it('lets a token revoke itself; its next request is a 401', async () => {
    const app = ownTokens()
    const made = await madeToken(app, { name: 'self', scopes: ['admin'] })

    const revoked = await revokeToken(app, made.id, made.token)
    const next = await listTokens(app, made.token)

    expect(revoked.statusCode).toBe(204)
    expectError(next, 401, INVALID_TOKEN)
  })

  it('frees the name of a revoked token, and refuses a name a live token has, in either source', async () => {
    const app = ownTokens()
    const old = await madeToken(app, { name: 'ci', scopes: ['plants:write'] })

    const taken = await createToken(app, { name: 'ci', scopes: ['plants:read'] })
    const takenByEnvironment = await createToken(app, { name: 'dashboard', scopes: ['plants:read'] })
    await revokeToken(app, old.id)
    const reused = await createToken(app, { name: 'ci', scopes: ['plants:read'] })

    expectError(taken, 409, 'a live access token is already named "ci"; revoke it or choose another name')
    expectError(takenByEnvironment, 409, 'a live access token is already named "dashboard"; revoke it or choose another name')
    expect(reused.statusCode).toBe(201)
    expect((await getPlants(app, reused.json().token)).statusCode).toBe(200)
    expectError(await getPlants(app, old.token), 401, INVALID_TOKEN)
  })

  it('refuses to revoke an environment token over HTTP, and 404s an unknown id', async () => {
    const app = ownTokens()

    const environment = await revokeToken(app, 'env:dashboard')
    const unknown = await revokeToken(app, '0b6f2e53-2f1c-4f4e-9a51-3c6d1f0e9a27')
    const unknownRead = await app.inject({ method: 'GET', url: '/admin/tokens/env:nobody', headers: bearer(ADMIN_TOKEN) })
    const badId = await app.inject({ method: 'GET', url: '/admin/tokens/a%20b', headers: bearer(ADMIN_TOKEN) })

    expectError(environment, 409, 'the access token "dashboard" comes from the environment and cannot be revoked over HTTP: ' +
      'remove it from the token file and send SIGHUP, or from PLANTSTORE_TOKENS and restart')
    expect((await getPlants(app, READ_TOKEN)).statusCode).toBe(200)
    expectError(unknown, 404, 'no access token has id "0b6f2e53-2f1c-4f4e-9a51-3c6d1f0e9a27"')
    expectError(unknownRead, 404, 'no access token has id "env:nobody"')
    expectError(badId, 400, 'path parameter id is not an access token id')
  })

  it.each([
    ['an unknown scope', { name: 'x', scopes: ['plants:delete'] }, 'scopes.0 must be one of plants:read, plants:write, admin'],
    ['no scopes', { name: 'x', scopes: [] }, 'scopes must not be empty'],
    ['a repeated scope', { name: 'x', scopes: ['admin', 'admin'] }, 'scopes must not hold the same value twice'],
    ['scopes as a string', { name: 'x', scopes: 'admin' }, 'scopes must be an array'],
    ['no scopes at all', { name: 'x' }, 'scopes is required'],
    ['no name', { scopes: ['admin'] }, 'name is required'],
    ['an empty name', { name: '', scopes: ['admin'] }, 'name must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"'],
    ['a name with a space', { name: 'my token', scopes: ['admin'] }, 'name must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"'],
    ['a name of 65 characters', { name: 'n'.repeat(65), scopes: ['admin'] }, 'name must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"'],
    ['a name that is a number', { name: 5, scopes: ['admin'] }, 'name must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"'],
    ['an expiry in the past', { name: 'x', scopes: ['admin'], expiresAt: '2020-01-01T00:00:00Z' }, 'expiresAt must be in the future'],
    ['an expiry without a time zone', { name: 'x', scopes: ['admin'], expiresAt: '2099-01-01T00:00:00' }, 'expiresAt must be an RFC 3339 date-time with a time zone, such as 2027-01-31T00:00:00Z'],
    ['an expiry that is no date', { name: 'x', scopes: ['admin'], expiresAt: '2099-02-30T00:00:00Z' }, 'expiresAt must be an RFC 3339 date-time with a time zone, such as 2027-01-31T00:00:00Z'],
    ['an expiry with an impossible offset', { name: 'x', scopes: ['admin'], expiresAt: '2099-01-01T00:00:00+25:00' }, 'expiresAt must be an RFC 3339 date-time with a time zone, such as 2027-01-31T00:00:00Z'],
    ['an expiry as a number', { name: 'x', scopes: ['admin'], expiresAt: 4102444800 }, 'expiresAt must be an RFC 3339 date-time with a time zone, such as 2027-01-31T00:00:00Z'],
    ['a body that is an array', [], 'request body must be a JSON object'],
    ['a body that is not JSON', '{"name":', /^request body is not valid JSON: /]
  ])('refuses %s with a 400 naming the field, and creates nothing', async (_case, body, message) => {
    const app = refusals()
    const before = (await listTokens(app)).body

    const response = await createToken(app, body)

    expectError(response, 400, message)
    expect((await listTokens(app)).body).toBe(before)
  })

  it('refuses a body over the limit (413) and another media type (415), creating nothing', async () => {
    const app = refusals()

    const large = await createToken(app, `{"name":"big","scopes":["admin"],"pad":"${'x'.repeat(20_000)}"}`)
    const text = await app.inject({ method: 'POST', url: '/admin/tokens', headers: { ...bearer(ADMIN_TOKEN), 'content-type': 'text/plain' }, payload: 'name=x' })

    expectError(large, 413, 'request body is larger than 16384 bytes')
    expect(text.statusCode).toBe(415)
    expect((await listTokens(app)).json()).toHaveLength(4)
  })
})

describe('Expiry', () => {
  it('refuses a token once it has expired, as invalid_token, and frees its name', async () => {
    const app = await buildTestApp({ tokens: ENVIRONMENT_TOKENS })
    const made = await madeToken(app, { name: 'short-lived', scopes: ['plants:read'], expiresAt: new Date(Date.now() + 600).toISOString() })
    expect((await getPlants(app, made.token)).statusCode).toBe(200)

    await sleep(700)
    const refused = await getPlants(app, made.token)
    const reused = await createToken(app, { name: 'short-lived', scopes: ['plants:read'] })

    expectError(refused, 401, INVALID_TOKEN)
    expect(refused.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
    expect(reused.statusCode).toBe(201)
  })
})

describe('Audit log lines', () => {
  it('name a created and a revoked token by id and name, never by the token', async () => {
    const lines: string[] = []
    const { Writable } = await import('node:stream')
    const logStream = new Writable({ write (chunk: Buffer, _encoding, callback) { lines.push(chunk.toString()); callback() } })
    const app = await buildTestApp({ tokens: ENVIRONMENT_TOKENS, logStream, config: { logLevel: 'trace' } })

    const made = await madeToken(app, { name: 'audited', scopes: ['plants:read'] })
    await revokeToken(app, made.id)
    await getPlants(app, made.token)
    await new Promise(setImmediate)

    const log = lines.join('')
    expect(log).toContain(`"accessToken":{"id":"${made.id}","name":"audited","scopes":["plants:read"]},"msg":"access token created"`)
    expect(log).toContain(`"accessToken":{"id":"${made.id}","name":"audited"},"msg":"access token revoked"`)
    expect(log).toContain('"tokenName":"ops"')
    expect(log).not.toContain(made.token)
    expect(log).not.toContain(digestToken(made.token).toString('hex'))
    expect(log).not.toContain(ADMIN_TOKEN)
  })
})
