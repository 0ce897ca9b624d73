import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { oversized } from '../helpers/hostile-tokens.js'
import { generateSigningKey, startIdentityProvider, type IdentityProvider, type TestSigningKey } from '../helpers/identity-provider.js'
import { claimsFor, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'
import { spawnServer, startServer } from '../helpers/server-process.js'

const SERVICE_TOKEN = 'jwt-process-service-token'

describe('The built server with AUTH_JWT_* set, over real HTTP', () => {
  let provider: IdentityProvider
  let key: TestSigningKey
  beforeAll(async () => {
    key = await generateSigningKey('ES256', 'process-ec')
    provider = await startIdentityProvider({ keys: [key] })
  })
  afterAll(() => provider.close())

  it('accepts a JWT from the issuer next to its service token, and says so once at start', async () => {
    const server = await startServer({
      DATABASE_URL: `sqlite:${join(temporaryFolder(), 'jwt.db')}`,
      PLANTSTORE_TOKENS: `name=reader;scopes=plants:read;${SERVICE_TOKEN}`,
      AUTH_JWT_ISSUER: provider.issuer,
      AUTH_JWT_AUDIENCE: TEST_AUDIENCE,
      LOG_LEVEL: 'info'
    })
    const token = await provider.sign(claimsFor(provider, { sub: 'greenhouse-sensor', scope: 'plants:write' }))

    const created = await fetch(`${server.baseUrl}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"id":7,"name":"Fern"}'
    })
    const read = await fetch(`${server.baseUrl}/plants/7`, { headers: { authorization: `Bearer ${SERVICE_TOKEN}` } })

    expect({ status: created.status, body: await created.text() }).toEqual({ status: 200, body: '{"name":"Fern"}' })
    expect({ status: read.status, body: await read.text() }).toEqual({ status: 200, body: '{"id":7,"name":"Fern"}' })
    const announced = server.stdout().split('\n').filter((line) => line.includes('JWT access tokens from the identity provider are accepted'))
    expect(announced.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([expect.objectContaining({
      level: 30, issuer: provider.issuer, audiences: [TEST_AUDIENCE], msg: 'JWT access tokens from the identity provider are accepted'
    })])
    expect({ discovery: provider.fetches.discovery.length, jwks: provider.fetches.jwks.length }).toEqual({ discovery: 1, jwks: 1 })
    expect(server.stdout()).not.toContain(token.split('.')[2])
  })

  it('refuses a 9 KB JWT like any refused token, and answers a 16 KB one, over Node\'s 16 KiB header limit, with 431 before authentication', async () => {
    const server = await startServer({ DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: SERVICE_TOKEN, AUTH_JWT_ISSUER: provider.issuer, AUTH_JWT_AUDIENCE: TEST_AUDIENCE })
    const nineKb = await oversized(claimsFor(provider), key, 9000)
    const sixteenKb = await oversized(claimsFor(provider), key)

    const refused = await fetch(`${server.baseUrl}/plants`, { headers: { authorization: `Bearer ${nineKb}` } })
    const tooLarge = await fetch(`${server.baseUrl}/plants`, { headers: { authorization: `Bearer ${sixteenKb}` } })

    expect({ status: refused.status, challenge: refused.headers.get('www-authenticate'), body: await refused.text() }).toEqual({
      status: 401,
      challenge: 'Bearer realm="plantstore", error="invalid_token"',
      body: '{"error":401,"message":"the bearer token is missing, malformed or not accepted"}'
    })
    expect({ status: tooLarge.status, body: await tooLarge.text() }).toEqual({ status: 431, body: '{"error":431,"message":"the request headers are too large"}' })
  })

  it.each([
    ['an issuer without an audience', { AUTH_JWT_ISSUER: 'https://id.example.com/realms/plants' },
      'AUTH_JWT_AUDIENCE must name the audience (comma-separated, one of which a token\'s "aud" must contain) when AUTH_JWT_ISSUER is set: ' +
      'without it a token the provider issued for any other service would be accepted'],
    ['an HS256 algorithm', { AUTH_JWT_ISSUER: 'https://id.example.com/realms/plants', AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_ALGORITHMS: 'HS256' },
      'AUTH_JWT_ALGORITHMS must not allow "HS256": only the provider\'s public-key algorithms are accepted ' +
      '(RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519)'],
    ['a malformed issuer URL', { AUTH_JWT_ISSUER: 'id.example.com', AUTH_JWT_AUDIENCE: 'plantstore' },
      'AUTH_JWT_ISSUER must be the identity provider\'s issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got "id.example.com"']
  ])('refuses to start on %s with one line, exit 1', async (_case, env, line) => {
    const server = spawnServer({ DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: SERVICE_TOKEN, ...env })

    expect(await server.exited).toBe(1)
    expect(server.stderr()).toBe(`plantstore could not start: configuration error: ${line}\n`)
  })
})
