import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { expect } from 'vitest'
import { buildApp } from '../../src/app.js'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import type { JwtSettings } from '../../src/auth/jwt/jwt-settings.js'
import { AccessTokenRegistry } from '../../src/auth/token-registry.js'
import { parseTokenList } from '../../src/auth/tokens.js'
import type { LogLevel } from '../../src/config.js'
import { bearer, expectError, expectNothingStored, postPlant, TEST_TOKEN, type Backend } from './app.js'
import { generateSigningKey, type IdentityProvider, type TestSigningKey } from './identity-provider.js'
import { TEST_AUDIENCE } from './jwt-tokens.js'
import { CAPTURED_LOG_LEVEL } from './log-capture.js'
import { collectingStream, type CollectedLog } from './log-lines.js'

export const INVALID_TOKEN_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'
export const BAD_TOKEN = 'the bearer token is missing, malformed or not accepted'
export const WRITE_SCOPE_CHALLENGE = 'Bearer realm="plantstore", error="insufficient_scope", scope="plants:write"'
export const LACKS_WRITE_SCOPE = 'this token lacks the scope "plants:write", which this operation needs'

/** The keys the attacked provider publishes: the three the service allows, and two it must not trust. */
export interface PublishedKeys {
  readonly rsa: TestSigningKey
  readonly ec: TestSigningKey
  readonly ed: TestSigningKey
  /** RS256 on a 1024-bit modulus: its JWK, with its kid, is in the set, and nothing it signs may pass. */
  readonly shortRsa: TestSigningKey
  /** PS256 and RS384: algorithms the service is not configured to allow. */
  readonly pss: TestSigningKey
  readonly rs384: TestSigningKey
}

/** The keys of a PublishedKeys, to publish: RSA 2048 first, so it signs by default. */
export function publishedKeyList (keys: PublishedKeys): TestSigningKey[] {
  return [keys.rsa, keys.ec, keys.ed, keys.shortRsa, keys.pss, keys.rs384]
}

export async function generatePublishedKeys (): Promise<PublishedKeys> {
  const [rsa, ec, ed, shortRsa, pss, rs384] = await Promise.all([
    generateSigningKey('RS256', 'rsa-2048'),
    generateSigningKey('ES256', 'ec-p256'),
    generateSigningKey('EdDSA', 'ed25519'),
    generateSigningKey('RS256', 'rsa-1024', { modulusLength: 1024 }),
    generateSigningKey('PS256', 'pss-2048'),
    generateSigningKey('RS384', 'rs384-2048')
  ])
  return { rsa, ec, ed, shortRsa, pss, rs384 }
}

/** The service's settings for `provider`: its issuer by discovery, TEST_AUDIENCE, RS256/ES256/EdDSA, `scope`, 30 s of tolerance. */
export function jwtSettingsFor (provider: Pick<IdentityProvider, 'issuer'>, overrides: Partial<JwtSettings> = {}): JwtSettings {
  return {
    issuer: provider.issuer,
    audiences: [TEST_AUDIENCE],
    jwksUrl: undefined,
    algorithms: ['RS256', 'ES256', 'EdDSA'],
    scopeClaim: 'scope',
    clockToleranceS: 30,
    ...overrides
  }
}

/** An app several tests share (built in `beforeAll`, closed in `afterAll`), with its log. */
export interface SharedJwtApp {
  readonly app: FastifyInstance
  readonly log: CollectedLog
  /** Closes the app, and so its store, and removes what the store left behind. */
  readonly close: () => Promise<void>
}

/**
 * The production app on a fresh store of `backend`, accepting TEST_TOKEN and the JWTs `settings` describe,
 * logging at debug level (or the captured level) into its `log`, so that it holds why each JWT was refused.
 */
export async function buildSharedJwtApp (backend: Backend, settings: JwtSettings): Promise<SharedJwtApp> {
  const { store, remove } = await backend.openForSuite()
  const log = collectingStream()
  let app: FastifyInstance
  try {
    const accessTokens = new AccessTokenRegistry(store.tokens, parseTokenList(TEST_TOKEN))
    await accessTokens.refresh()
    app = await buildApp(
      { bodyLimit: 16384, logLevel: (CAPTURED_LOG_LEVEL as LogLevel | undefined) ?? 'debug', prettyLogs: false },
      { store, accessTokens, jwtAccessTokens: new JwtAccessTokens(settings), logStream: log.stream }
    )
  } catch (error) {
    await store.close()
    await remove()
    throw error
  }
  return { app, log, close: async () => { await app.close(); await remove() } }
}

/** POST /plants `{"id":<id>,"name":"Fern"}` with `token` as the bearer. */
export function postWithJwt (app: FastifyInstance, token: string, id: number): Promise<LightMyRequestResponse> {
  return postPlant(app, { id, name: 'Fern' }, bearer(token))
}

/** A 401 `invalid_token` with the message of every refused credential, and nothing stored under `id`; returns the response. */
export async function expectRefused (app: FastifyInstance, token: string, id: number): Promise<LightMyRequestResponse> {
  const response = await postWithJwt(app, token, id)

  expectError(response, 401, BAD_TOKEN)
  expect(response.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
  await expectNothingStored(app, String(id))
  return response
}

/** As expectRefused, and the shared app logged, at debug level, one refusal of that request whose reason matches `reason`. */
export async function expectRefusedBecause (shared: SharedJwtApp, token: string, id: number, reason: RegExp): Promise<void> {
  const response = await expectRefused(shared.app, token, id)

  expect(refusalsOf(shared.log, response)).toEqual([{ level: 20, reason: expect.stringMatching(reason) }])
}

/** The "JWT access token refused" lines `log` holds for the request `response` answers: their level and reason. */
export function refusalsOf (log: CollectedLog, response: LightMyRequestResponse): Array<{ level: unknown, reason: unknown }> {
  return log.lines()
    .filter((line) => line.msg === 'JWT access token refused' && line.reqId === response.headers['x-request-id'])
    .map(({ level, reason }) => ({ level, reason }))
}

/** A 403 `insufficient_scope` naming plants:write, and nothing stored under `id`. */
export async function expectInsufficientScope (app: FastifyInstance, token: string, id: number): Promise<void> {
  const response = await postWithJwt(app, token, id)

  expectError(response, 403, LACKS_WRITE_SCOPE)
  expect(response.headers['www-authenticate']).toBe(WRITE_SCOPE_CHALLENGE)
  await expectNothingStored(app, String(id))
}

/** A 200 with the plant, no challenge, and the plant stored under `id`; returns the response. */
export async function expectAccepted (app: FastifyInstance, token: string, id: number): Promise<LightMyRequestResponse> {
  const response = await postWithJwt(app, token, id)

  expect({ status: response.statusCode, body: response.body, location: response.headers.location }).toEqual({ status: 200, body: '{"name":"Fern"}', location: `/plants/${id}` })
  expect(response.headers['www-authenticate']).toBeUndefined()
  const stored = await app.inject({ method: 'GET', url: `/plants/${id}`, headers: bearer() })
  expect({ status: stored.statusCode, body: stored.body }).toEqual({ status: 200, body: `{"id":${id},"name":"Fern"}` })
  return response
}
