import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { backends, bearer, buildTestApp, expectError, expectNothingStored } from '../helpers/app.js'
import { hmacWithPublicKey, jweShaped, nonJsonPayload, oversized, unsignedToken, withCritHeader, withForgedSignature } from '../helpers/hostile-tokens.js'
import { generateSigningKey, startIdentityProvider, type IdentityProvider, type TestSigningKey } from '../helpers/identity-provider.js'
import {
  BAD_TOKEN, buildSharedJwtApp, expectAccepted, expectRefusedBecause, generatePublishedKeys, INVALID_TOKEN_CHALLENGE,
  jwtSettingsFor, postWithJwt, publishedKeyList, refusalsOf, type PublishedKeys, type SharedJwtApp
} from '../helpers/jwt-service.js'
import { collectingStream } from '../helpers/log-lines.js'
import { claimsFor, nowSeconds } from '../helpers/jwt-tokens.js'

// Forged, confused and malformed JWTs (issue 27, "Bad input and attacks"), sent through HTTP to a service
// that trusts one real identity provider: each is a 401 invalid_token that stores nothing. The claims a
// valid signature vouches for (iss, aud, exp, nbf, iat, subject, scopes) are in jwt-claims.test.ts.

/** jose refuses an algorithm the service does not allow before it looks for a key. */
const NOT_ALLOWED = /^ERR_JOSE_ALG_NOT_ALLOWED: /

let provider: IdentityProvider
let keys: PublishedKeys
/** The attacker's own key, and a server publishing it, as a token's `jku` may name. */
let attackerKey: TestSigningKey
let attackerServer: IdentityProvider

beforeAll(async () => {
  [keys, attackerKey] = await Promise.all([generatePublishedKeys(), generateSigningKey('RS256', 'attacker-1')])
  provider = await startIdentityProvider({ keys: publishedKeyList(keys) })
  attackerServer = await startIdentityProvider({ keys: [attackerKey] })
})

afterAll(async () => {
  await provider?.close()
  await attackerServer?.close()
})

describe.each(backends)('JWT access tokens under attack on $name', (backend) => {
  let shared: SharedJwtApp

  beforeAll(async () => {
    shared = await buildSharedJwtApp(backend, jwtSettingsFor(provider))
  })

  afterAll(async () => {
    await shared?.close()
  })

  describe('when the token is signed properly by a published key of an allowed algorithm', () => {
    it.each([
      ['RS256 (RSA 2048)', 'rsa', 100],
      ['ES256 (P-256)', 'ec', 101],
      ['EdDSA (Ed25519)', 'ed', 102]
    ] as const)('then %s is accepted: the control for every case below', async (_alg, name, id) => {
      const token = await provider.sign(claimsFor(provider), { key: keys[name] })

      await expectAccepted(shared.app, token, id)
    })
  })

  describe('when the signature is not the provider\'s', () => {
    it('then alg "none" with an empty signature is refused', async () => {
      await expectRefusedBecause(shared, unsignedToken(claimsFor(provider)), 110, NOT_ALLOWED)
    })

    it.each([
      ['its SPKI PEM', 'spki-pem', 111],
      ['its JWK\'s JSON', 'jwk-json', 112]
    ] as const)('then HS256 with the RSA key\'s kid and %s as the HMAC secret (algorithm confusion) is refused', async (_form, form, id) => {
      await expectRefusedBecause(shared, await hmacWithPublicKey(claimsFor(provider), keys.rsa, form), id, NOT_ALLOWED)
    })

    it('then a signature with one bit changed is refused', async () => {
      const forged = withForgedSignature(await provider.sign(claimsFor(provider)))

      await expectRefusedBecause(shared, forged, 113, /^ERR_JWS_SIGNATURE_VERIFICATION_FAILED: /)
    })

    it('then a token signed by a published key but naming a kid that is not in the set is refused', async () => {
      const token = await provider.sign(claimsFor(provider), { key: keys.rsa, header: { kid: 'not-in-the-set' } })

      await expectRefusedBecause(shared, token, 114, /^ERR_JWKS_NO_MATCHING_KEY: /)
    })

    it('then a token signed by the attacker\'s key, carrying its public key in a jwk header and naming the RSA key\'s kid, is refused', async () => {
      const token = await provider.sign(claimsFor(provider), { key: attackerKey, header: { kid: keys.rsa.kid, jwk: attackerKey.publicJwk } })

      await expectRefusedBecause(shared, token, 118, /^ERR_JWS_SIGNATURE_VERIFICATION_FAILED: /)
    })

    it('then a token signed by the attacker\'s key whose jku header names the attacker\'s key set is refused, and that set never fetched', async () => {
      const token = await provider.sign(claimsFor(provider), { key: attackerKey, header: { jku: attackerServer.jwksUrl } })

      await expectRefusedBecause(shared, token, 119, /^ERR_JWKS_NO_MATCHING_KEY: /)
      expect(attackerServer.fetches).toEqual({ discovery: [], jwks: [] })
    })

    it('then a token signed by a 1024-bit RSA key whose JWK, with its kid, is in the published set is refused', async () => {
      const token = await provider.sign(claimsFor(provider), { key: keys.shortRsa })

      await expectRefusedBecause(shared, token, 115, /^RS256 requires key modulusLength to be 2048 bits or larger$/)
    })

    it.each([
      ['PS256', 'pss', 116],
      ['RS384', 'rs384', 117]
    ] as const)('then %s, outside AUTH_JWT_ALGORITHMS, is refused even with its key published', async (_alg, name, id) => {
      const token = await provider.sign(claimsFor(provider), { key: keys[name] })

      await expectRefusedBecause(shared, token, id, NOT_ALLOWED)
    })
  })

  describe('when the token is not a JWS the service can read', () => {
    it('then a crit header naming an extension the service does not understand is refused', async () => {
      await expectRefusedBecause(shared, await withCritHeader(claimsFor(provider), keys.rsa), 120, /^ERR_JOSE_NOT_SUPPORTED: Extension Header Parameter "exp-ext" is not recognized$/)
    })

    it('then a JWE (five segments) is refused', async () => {
      const token = await jweShaped(claimsFor(provider))

      expect(token.split('.')).toHaveLength(5)
      await expectRefusedBecause(shared, token, 121, /^not a JWT of at most 8192 characters in compact form$/)
    })

    it('then a properly signed token whose payload is not JSON is refused', async () => {
      await expectRefusedBecause(shared, await nonJsonPayload(keys.rsa), 122, /^ERR_JWT_INVALID: /)
    })
  })

  describe('when the token is longer than 8,192 characters', () => {
    it('then a properly signed, padded 16 KB token is refused', async () => {
      const token = await oversized(claimsFor(provider), keys.rsa)

      expect(Math.abs(token.length - 16 * 1024)).toBeLessThanOrEqual(3)
      await expectRefusedBecause(shared, token, 130, /^not a JWT of at most 8192 characters in compact form$/)
    })

    it('then a properly signed, padded token of 9,000 characters is refused, and one of 8,100 accepted', async () => {
      const over = await oversized(claimsFor(provider), keys.rsa, 9000)
      const under = await oversized(claimsFor(provider), keys.rsa, 8100)

      expect({ over: Math.abs(over.length - 9000) <= 3, under: Math.abs(under.length - 8100) <= 3 }).toEqual({ over: true, under: true })
      await expectRefusedBecause(shared, over, 131, /^not a JWT of at most 8192 characters in compact form$/)
      await expectAccepted(shared.app, under, 132)
    })
  })

  it('when JWTs are refused, then each reason is logged at debug level, the client gets one answer, and no line holds a token', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ store: await backend.open(), jwt: new JwtAccessTokens(jwtSettingsFor(provider)), config: { logLevel: 'debug' }, logStream: log.stream })
    const now = nowSeconds()
    const expired = await provider.sign(claimsFor(provider, { iat: now - 420, nbf: now - 420, exp: now - 120 }))
    const original = await provider.sign(claimsFor(provider))
    const forged = withForgedSignature(original)

    const expiredAnswer = await postWithJwt(app, expired, 140)
    const forgedAnswer = await postWithJwt(app, forged, 141)
    // Completed-request lines are written at the end of the event-loop turn.
    await new Promise(setImmediate)

    for (const response of [expiredAnswer, forgedAnswer]) {
      expectError(response, 401, BAD_TOKEN)
      expect(response.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
    }
    expect(forgedAnswer.body).toBe(expiredAnswer.body)
    expect(log.lines().filter((line) => line.msg === 'JWT access token refused')).toHaveLength(2)
    expect(refusalsOf(log, expiredAnswer)).toEqual([{ level: 20, reason: 'ERR_JWT_EXPIRED: "exp" claim timestamp check failed' }])
    expect(refusalsOf(log, forgedAnswer)).toEqual([{ level: 20, reason: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED: signature verification failed' }])
    const text = log.text()
    expect(text).toContain('"msg":"request completed"')
    for (const token of [expired, forged, original]) {
      expect(text).not.toContain(token)
      expect(text).not.toContain(token.split('.')[2])
    }
    await expectNothingStored(app, '140')
    await expectNothingStored(app, '141')
  })

  it('when an address sent AUTH_FAILURE_LIMIT_PER_MINUTE bad JWTs, then its next request, even with a valid JWT, is a 429 with Retry-After', async () => {
    const app = await buildTestApp({ store: await backend.open(), jwt: new JwtAccessTokens(jwtSettingsFor(provider)), config: { authFailureLimitPerMinute: 3 } })
    const now = nowSeconds()
    const post = (token: string, id: number, remoteAddress = '203.0.113.7') =>
      app.inject({ method: 'POST', url: '/plants', remoteAddress, headers: { 'content-type': 'application/json', ...bearer(token) }, payload: { id, name: 'Fern' } })
    const valid = await provider.sign(claimsFor(provider))
    const unsigned = unsignedToken(claimsFor(provider))
    const forged = withForgedSignature(await provider.sign(claimsFor(provider)))
    const expired = await provider.sign(claimsFor(provider, { iat: now - 420, nbf: now - 420, exp: now - 120 }))

    const refused = [await post(unsigned, 150), await post(forged, 151), await post(expired, 152)]
    const limited = await post(valid, 153)
    const validFromElsewhere = await post(valid, 154, '203.0.113.8')

    for (const response of refused) {
      expectError(response, 401, BAD_TOKEN)
      expect(response.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
    }
    const retryAfter = Number(limited.headers['retry-after'])
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expectError(limited, 429, `too many failed authentications from this address, retry in ${retryAfter} s`)
    expect(limited.headers['www-authenticate']).toBeUndefined()
    expect({ status: validFromElsewhere.statusCode, body: validFromElsewhere.body }).toEqual({ status: 200, body: '{"name":"Fern"}' })
    for (const id of ['150', '151', '152', '153']) await expectNothingStored(app, id)
  })
})
