import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { backends, bearer, buildTestApp, expectError, postPlant, TEST_TOKEN } from '../helpers/app.js'
import { generateSigningKey, startIdentityProvider, type IdentityProvider, type TestSigningKey } from '../helpers/identity-provider.js'
import {
  buildSharedJwtApp, expectAccepted, expectRefusedBecause, jwtSettingsFor, LACKS_WRITE_SCOPE, WRITE_SCOPE_CHALLENGE, type SharedJwtApp
} from '../helpers/jwt-service.js'
import { claimsFor, nowSeconds, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'

// Rules of API.md's "Tokens from an identity provider (JWT access tokens)" that the other JWT suites leave
// open: `iss` compared exactly, any one of several audiences, a tolerance and an algorithm list other than
// the defaults, `sub` before `client_id`, the `admin` scope under /admin, and service tokens looked up
// before JWTs. Through HTTP on the memory store: none of these depends on the backend.

const memory = backends.find(({ name }) => name === 'memory') ?? backends[0]!

let provider: IdentityProvider
let rsa: TestSigningKey
let pss: TestSigningKey

beforeAll(async () => {
  [rsa, pss] = await Promise.all([generateSigningKey('RS256', 'contract-rs256'), generateSigningKey('PS256', 'contract-ps256')])
  provider = await startIdentityProvider({ keys: [rsa, pss] })
})

afterAll(async () => {
  await provider?.close()
})

describe('A JWT judged against non-default settings', () => {
  const shared: SharedJwtApp[] = []
  const appWith = async (overrides: Parameters<typeof jwtSettingsFor>[1]): Promise<SharedJwtApp> => {
    const app = await buildSharedJwtApp(memory, jwtSettingsFor(provider, overrides))
    shared.push(app)
    return app
  }

  afterAll(async () => {
    await Promise.all(shared.map((app) => app.close()))
  })

  it('when the token\'s iss differs from AUTH_JWT_ISSUER only by a trailing slash, then it is refused: iss is compared exactly', async () => {
    const app = await appWith({})

    await expectRefusedBecause(app, await provider.sign(claimsFor(provider, { iss: `${provider.issuer}/` })), 300, /^ERR_JWT_CLAIM_VALIDATION_FAILED: unexpected "iss" claim value$/)
    await expectAccepted(app.app, await provider.sign(claimsFor(provider)), 301)
  })

  it('when AUTH_JWT_AUDIENCE names two audiences, then an aud array holding the second among others is accepted, and one holding neither refused', async () => {
    const app = await appWith({ audiences: [TEST_AUDIENCE, 'inventory-api'] })

    await expectAccepted(app.app, await provider.sign(claimsFor(provider, { aud: ['account', 'inventory-api'] })), 310)
    await expectAccepted(app.app, await provider.sign(claimsFor(provider, { aud: TEST_AUDIENCE })), 311)
    await expectRefusedBecause(app, await provider.sign(claimsFor(provider, { aud: ['account', 'billing-api'] })), 312, /^ERR_JWT_CLAIM_VALIDATION_FAILED: unexpected "aud" claim value$/)
  })

  it('when AUTH_JWT_CLOCK_TOLERANCE_S is 120, then exp and nbf 60 s out are accepted, and 180 s out refused', async () => {
    const app = await appWith({ clockToleranceS: 120 })
    const now = nowSeconds()
    const longAgo = { iat: now - 600, nbf: now - 600 }

    await expectAccepted(app.app, await provider.sign(claimsFor(provider, { ...longAgo, exp: now - 60 })), 320)
    await expectRefusedBecause(app, await provider.sign(claimsFor(provider, { ...longAgo, exp: now - 180 })), 321, /^ERR_JWT_EXPIRED: /)
    await expectAccepted(app.app, await provider.sign(claimsFor(provider, { nbf: now + 60 })), 322)
    await expectRefusedBecause(app, await provider.sign(claimsFor(provider, { nbf: now + 180 })), 323, /^ERR_JWT_CLAIM_VALIDATION_FAILED: "nbf" claim timestamp check failed$/)
  })

  it('when AUTH_JWT_ALGORITHMS is PS256 alone, then a PS256 token is accepted and an RS256 one, a default algorithm, refused', async () => {
    const app = await appWith({ algorithms: ['PS256'] })

    await expectAccepted(app.app, await provider.sign(claimsFor(provider), { key: pss }), 330)
    await expectRefusedBecause(app, await provider.sign(claimsFor(provider), { key: rsa }), 331, /^ERR_JOSE_ALG_NOT_ALLOWED: /)
  })

  it('when the token names both sub and client_id, then the log line names it jwt:<sub>', async () => {
    const app = await appWith({})

    const response = await expectAccepted(app.app, await provider.sign(claimsFor(provider, { sub: 'f3a9c1e0-7b2d', client_id: 'inventory-sync' })), 340)
    // Completed-request lines are written at the end of the event-loop turn.
    await new Promise(setImmediate)

    const completed = app.log.lines().filter((line) => line.msg === 'request completed' && line.reqId === response.headers['x-request-id'])
    expect(completed.map(({ statusCode, tokenName }) => ({ statusCode, tokenName }))).toEqual([{ statusCode: 200, tokenName: 'jwt:f3a9c1e0-7b2d' }])
  })
})

describe('A JWT under /admin', () => {
  it('when it carries the plant scopes but not admin, then POST and GET /admin/tokens are 403 insufficient_scope naming admin, and no token is made', async () => {
    const app = await buildTestApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider)), tokens: [`name=ops;scopes=admin;${TEST_TOKEN}`] })
    const token = await provider.sign(claimsFor(provider, { scope: 'plants:read plants:write' }))

    const created = await app.inject({ method: 'POST', url: '/admin/tokens', headers: bearer(token), payload: { name: 'made-by-jwt', scopes: ['plants:read'] } })
    const listed = await app.inject({ method: 'GET', url: '/admin/tokens', headers: bearer(token) })
    const byAdmin = await app.inject({ method: 'GET', url: '/admin/tokens', headers: bearer() })

    for (const response of [created, listed]) {
      expectError(response, 403, 'this token lacks the scope "admin", which this operation needs')
      expect(response.headers['www-authenticate']).toBe('Bearer realm="plantstore", error="insufficient_scope", scope="admin"')
    }
    expect(byAdmin.statusCode).toBe(200)
    expect(byAdmin.json<Array<{ name: string }>>().map(({ name }) => name)).toEqual(['ops'])
  })
})

describe('Service tokens next to JWTs', () => {
  it('when a PLANTSTORE_TOKENS entry is itself a valid JWT of the issuer, then it is served as that service token, with the entry\'s scopes, not the claims\'', async () => {
    const jwtShaped = await provider.sign(claimsFor(provider, { sub: 'not-this-subject', scope: 'plants:read plants:write' }))
    const app = await buildTestApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider)), tokens: [TEST_TOKEN, `name=legacy;scopes=plants:read;${jwtShaped}`] })

    const write = await postPlant(app, { id: 350, name: 'Fern' }, bearer(jwtShaped))
    const read = await app.inject({ method: 'GET', url: '/plants?limit=1', headers: bearer(jwtShaped) })

    expectError(write, 403, LACKS_WRITE_SCOPE)
    expect(write.headers['www-authenticate']).toBe(WRITE_SCOPE_CHALLENGE)
    expect({ status: read.statusCode, body: read.body }).toEqual({ status: 200, body: '[]' })
  })

  it('when a service token has dots but is no JWT, then it keeps working with an identity provider configured', async () => {
    const dotted = 'ops.deploy.key-2026'
    const app = await buildTestApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider)), tokens: [TEST_TOKEN, dotted] })

    const created = await postPlant(app, { id: 360, name: 'Fern' }, bearer(dotted))

    expect({ status: created.statusCode, body: created.body }).toEqual({ status: 200, body: '{"name":"Fern"}' })
  })

  it('when the JWT comes with a lower-case scheme and spaces around it, then it is accepted: the scheme is case-insensitive and the spaces are not the token', async () => {
    const app = await buildTestApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider)) })
    const token = await provider.sign(claimsFor(provider))

    const created = await postPlant(app, { id: 370, name: 'Fern' }, { authorization: `bearer   ${token}  ` })

    expect({ status: created.statusCode, body: created.body }).toEqual({ status: 200, body: '{"name":"Fern"}' })
  })
})
