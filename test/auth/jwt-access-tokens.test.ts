import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import type { JwtSettings } from '../../src/auth/jwt/jwt-settings.js'
import { backends, bearer, buildTestApp, expectError, postPlant, TEST_TOKEN, type Backend } from '../helpers/app.js'
import { generateSigningKey, startIdentityProvider, type IdentityProvider, type TestSigningKey } from '../helpers/identity-provider.js'
import {
  auth0AccessToken, auth0Layout, claimsFor, ENTRA_API_CLIENT_ID, entraAccessToken, entraLayout, keycloakAccessToken, keycloakLayout,
  type ProviderLayout
} from '../helpers/jwt-tokens.js'
import { jwtSettingsFor } from '../helpers/jwt-service.js'
import { collectingStream } from '../helpers/log-lines.js'

const INVALID_TOKEN_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'
const BAD_TOKEN = 'the bearer token is missing, malformed or not accepted'

async function appFor (backend: Backend, provider: IdentityProvider, options: { settings?: Partial<JwtSettings>, tokens?: readonly string[], config?: Parameters<typeof buildTestApp>[0] } = {}): Promise<FastifyInstance> {
  return buildTestApp({
    store: await backend.open(),
    jwt: new JwtAccessTokens(jwtSettingsFor(provider, options.settings)),
    ...(options.tokens === undefined ? {} : { tokens: options.tokens }),
    ...options.config
  })
}

function get (app: FastifyInstance, url: string, token: string) {
  return app.inject({ method: 'GET', url, headers: bearer(token) })
}

describe.each(backends)('JWT access tokens on $name', (backend) => {
  let provider: IdentityProvider
  let keys: Record<'rsa' | 'ec' | 'ed', TestSigningKey>

  beforeAll(async () => {
    keys = {
      rsa: await generateSigningKey('RS256', 'rsa-1'),
      ec: await generateSigningKey('ES256', 'ec-1'),
      ed: await generateSigningKey('EdDSA', 'ed-1')
    }
    provider = await startIdentityProvider({ keys: [keys.rsa, keys.ec, keys.ed] })
  })
  afterAll(() => provider.close())

  it.each(['rsa', 'ec', 'ed'] as const)('accepts a token signed with the %s key of the discovered set, for writes and reads', async (kind) => {
    const app = await appFor(backend, provider)
    const token = await provider.sign(claimsFor(provider), { key: keys[kind] })

    const created = await postPlant(app, '{"id":9007199254740993,"name":"Fern","tag":"jwt"}', bearer(token))
    const read = await get(app, '/plants/9007199254740993', token)

    expect({ status: created.statusCode, body: created.body }).toEqual({ status: 200, body: '{"name":"Fern","tag":"jwt"}' })
    expect({ status: read.statusCode, body: read.body }).toEqual({ status: 200, body: '{"id":9007199254740993,"name":"Fern","tag":"jwt"}' })
  })

  it('serves a service token and a JWT side by side on one service, each with its own scopes', async () => {
    const app = await appFor(backend, provider, { tokens: [`name=reader;scopes=plants:read;${TEST_TOKEN}`] })
    const writer = await provider.sign(claimsFor(provider, { sub: 'writer-service', scope: 'plants:write' }))

    const byJwt = await postPlant(app, { id: 1, name: 'Fern' }, bearer(writer))
    const byServiceToken = await get(app, '/plants/1', TEST_TOKEN)
    const serviceTokenWrites = await postPlant(app, { id: 2, name: 'Moss' }, bearer(TEST_TOKEN))
    const jwtReads = await get(app, '/plants/1', writer)

    expect({ status: byJwt.statusCode, body: byJwt.body }).toEqual({ status: 200, body: '{"name":"Fern"}' })
    expect({ status: byServiceToken.statusCode, body: byServiceToken.body }).toEqual({ status: 200, body: '{"id":1,"name":"Fern"}' })
    expectError(serviceTokenWrites, 403, 'this token lacks the scope "plants:write", which this operation needs')
    expectError(jwtReads, 403, 'this token lacks the scope "plants:read", which this operation needs')
    expect(jwtReads.headers['www-authenticate']).toBe('Bearer realm="plantstore", error="insufficient_scope", scope="plants:read"')
  })

  it('lets a JWT with admin make a service token, and lists only service tokens', async () => {
    const app = await appFor(backend, provider, { tokens: [`name=ops;scopes=admin;${TEST_TOKEN}`] })
    const admin = await provider.sign(claimsFor(provider, { sub: 'platform-admin', scope: 'admin' }))

    const created = await app.inject({ method: 'POST', url: '/admin/tokens', headers: bearer(admin), payload: { name: 'made-by-jwt', scopes: ['plants:read'] } })
    const listed = await get(app, '/admin/tokens', admin)
    const plantsWithAdmin = await get(app, '/plants', admin)

    expect(created.statusCode).toBe(201)
    const made = created.json<{ token: string }>()
    expect((await get(app, '/plants', made.token)).statusCode).toBe(200)
    expect(listed.statusCode).toBe(200)
    expect(listed.json<Array<{ name: string, source: string }>>().map(({ name, source }) => ({ name, source })))
      .toEqual([{ name: 'made-by-jwt', source: 'store' }, { name: 'ops', source: 'environment' }])
    expectError(plantsWithAdmin, 403, 'this token lacks the scope "plants:read", which this operation needs')
  })

  it('refuses every JWT when no identity provider is configured: a JWT is then an unknown token', async () => {
    const app = await buildTestApp({ store: await backend.open() })
    const token = await provider.sign(claimsFor(provider))

    const response = await postPlant(app, { id: 3, name: 'Fern' }, bearer(token))

    expectError(response, 401, BAD_TOKEN)
    expect(response.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
  })
})

describe.each(backends)('Tokens shaped as identity providers issue them, on $name', (backend) => {
  const providers: IdentityProvider[] = []
  afterAll(() => Promise.all(providers.map((provider) => provider.close())))

  async function providerWith (layout: ProviderLayout, ...keys: TestSigningKey[]) {
    const provider = await startIdentityProvider({ ...layout, keys })
    providers.push(provider)
    return provider
  }

  it('takes Keycloak\'s client-credentials token: scopes in the "scope" string among profile and email, aud an array', async () => {
    const provider = await providerWith(keycloakLayout('acme'), await generateSigningKey('RS256', 'kc-rsa'))
    const log = collectingStream()
    const app = await buildTestApp({ store: await backend.open(), jwt: new JwtAccessTokens(jwtSettingsFor(provider)), logStream: log.stream, config: { logLevel: 'info' } })
    const token = await keycloakAccessToken(provider, { clientId: 'inventory-sync', scopes: ['plants:read', 'plants:write'] })

    const created = await postPlant(app, { id: 10, name: 'Fern' }, bearer(token))
    const read = await get(app, '/plants/10', token)
    await new Promise(setImmediate)

    expect(provider.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/realms\/acme$/)
    expect([created.statusCode, read.statusCode]).toEqual([200, 200])
    const subject = /"sub":"([^"]+)"/.exec(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString())?.[1]
    expect(log.lines().filter((line) => line.msg === 'request completed').map((line) => line.tokenName))
      .toEqual([`jwt:${subject}`, `jwt:${subject}`])
  })

  it('takes Auth0\'s token: an issuer ending in "/", sub "<client id>@clients", aud a string; in both token profiles', async () => {
    const provider = await providerWith(auth0Layout(), await generateSigningKey('RS256', 'auth0-rsa'))
    const log = collectingStream()
    const app = await buildTestApp({ store: await backend.open(), jwt: new JwtAccessTokens(jwtSettingsFor(provider)), logStream: log.stream, config: { logLevel: 'info' } })
    const auth0Profile = await auth0AccessToken(provider, { clientId: 'K8sQ2xNw', scopes: ['plants:write'], permissions: true })
    const rfc9068Profile = await auth0AccessToken(provider, { clientId: 'Zr41mPq0', scopes: ['plants:read'], profile: 'rfc9068' })

    const created = await postPlant(app, { id: 11, name: 'Fern' }, bearer(auth0Profile))
    const read = await get(app, '/plants/11', rfc9068Profile)
    await new Promise(setImmediate)

    expect(provider.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/)
    expect([created.statusCode, read.statusCode]).toEqual([200, 200])
    expect(log.lines().filter((line) => line.msg === 'request completed').map((line) => line.tokenName))
      .toEqual(['jwt:K8sQ2xNw@clients', 'jwt:Zr41mPq0@clients'])
  })

  it('takes Entra ID\'s app-only v2.0 token with AUTH_JWT_SCOPE_CLAIM=roles: the app roles are the scopes, aud the API\'s client id', async () => {
    const provider = await providerWith(entraLayout(), await generateSigningKey('RS256', 'entra-rsa'))
    const app = await buildTestApp({ store: await backend.open(), jwt: new JwtAccessTokens(jwtSettingsFor(provider, { audiences: [ENTRA_API_CLIENT_ID, 'api://plantstore'], scopeClaim: 'roles' })) })
    const writer = await entraAccessToken(provider, { clientId: '0d9e5c1b-2f3a-4b6c-8d7e-9f0a1b2c3d4e', scopes: ['plants:write'] })
    const readerByUri = await entraAccessToken(provider, { clientId: '0d9e5c1b-2f3a-4b6c-8d7e-9f0a1b2c3d4e', scopes: ['plants:read'], audience: 'api://plantstore' })

    const created = await postPlant(app, { id: 12, name: 'Fern' }, bearer(writer))
    const read = await get(app, '/plants/12', readerByUri)
    const writerReads = await get(app, '/plants/12', writer)

    expect({ status: created.statusCode, body: created.body }).toEqual({ status: 200, body: '{"name":"Fern"}' })
    expect({ status: read.statusCode, body: read.body }).toEqual({ status: 200, body: '{"id":12,"name":"Fern"}' })
    expectError(writerReads, 403, 'this token lacks the scope "plants:read", which this operation needs')
  })

  it('finds no scope in Entra ID\'s token under the default claim "scope": 403, not a silent grant', async () => {
    const provider = await providerWith(entraLayout('11111111-2222-4333-8444-555555555555'), await generateSigningKey('RS256', 'entra-2'))
    const app = await buildTestApp({ store: await backend.open(), jwt: new JwtAccessTokens(jwtSettingsFor(provider, { audiences: [ENTRA_API_CLIENT_ID] })) })
    const token = await entraAccessToken(provider, { clientId: 'client-a', scopes: ['plants:read', 'plants:write'] })

    expectError(await get(app, '/plants', token), 403, 'this token lacks the scope "plants:read", which this operation needs')
  })
})

describe('A JWT\'s identity in the log line and the per-token rate limit', () => {
  let provider: IdentityProvider
  beforeAll(async () => { provider = await startIdentityProvider({ keys: [await generateSigningKey('ES256', 'ec-limit')] }) })
  afterAll(() => provider.close())

  it('counts requests per subject: two tokens of one subject share a limit, another subject has its own', async () => {
    const app = await buildTestApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider)), config: { rateLimitPerMinute: 2 } })
    const first = await provider.sign(claimsFor(provider, { sub: 'batch-job' }))
    const second = await provider.sign(claimsFor(provider, { sub: 'batch-job' }))
    const other = await provider.sign(claimsFor(provider, { sub: 'web-shop' }))

    const statuses = []
    for (const token of [first, second, first, other]) statuses.push((await get(app, '/plants', token)).statusCode)

    expect(first).not.toBe(second)
    expect(statuses).toEqual([200, 200, 429, 200])
  })

  it('names a token without "sub" by its client_id in the log line, and never logs the token', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider)), logStream: log.stream, config: { logLevel: 'trace' } })
    const token = await provider.sign(claimsFor(provider, { sub: undefined, client_id: 'nightly-export' }))

    const response = await get(app, '/plants', token)
    await new Promise(setImmediate)

    expect(response.statusCode).toBe(200)
    expect(log.lines().find((line) => line.msg === 'request completed')?.tokenName).toBe('jwt:nightly-export')
    expect(log.text()).not.toContain(token.split('.')[2])
    expect(log.text()).not.toContain(token.split('.')[1])
  })
})

describe('The OpenAPI document with an identity provider configured', () => {
  it('says the bearer may be a JWT from the issuer, for its audience, with the scope claim', async () => {
    const provider = await startIdentityProvider({ keys: [await generateSigningKey('RS256', 'doc')] })
    try {
      const app = await buildTestApp({ jwt: new JwtAccessTokens(jwtSettingsFor(provider, { audiences: ['plantstore-api', 'api://plants'] })) })
      const plain = await buildTestApp()

      const scheme = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{ components: { securitySchemes: { bearerAuth: { description: string } } } }>()
        .components.securitySchemes.bearerAuth
      const plainScheme = (await plain.inject({ method: 'GET', url: '/openapi.json' })).json<{ components: { securitySchemes: { bearerAuth: { description: string } } } }>()
        .components.securitySchemes.bearerAuth

      expect(scheme).toEqual({
        type: 'http',
        scheme: 'bearer',
        description: 'An access token: one made by `POST /admin/tokens` or `plantstore tokens create`, an entry of PLANTSTORE_TOKENS, ' +
          `or the \`initial-admin\` token the first start printed; or a JWT access token issued by ${provider.issuer} for the audience ` +
          'plantstore-api or api://plants, its scopes in the `scope` claim. Each operation lists the scope it needs.'
      })
      expect(plainScheme.description).toBe('An access token: one made by `POST /admin/tokens` or `plantstore tokens create`, an entry of ' +
        'PLANTSTORE_TOKENS, or the `initial-admin` token the first start printed. Each operation lists the scope it needs.')
    } finally {
      await provider.close()
    }
  })
})
