import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { backends, buildTestApp } from '../helpers/app.js'
import { startIdentityProvider, type IdentityProvider } from '../helpers/identity-provider.js'
import {
  buildSharedJwtApp, expectAccepted, expectInsufficientScope, expectRefused, expectRefusedBecause, generatePublishedKeys, jwtSettingsFor,
  publishedKeyList, refusalsOf, type SharedJwtApp
} from '../helpers/jwt-service.js'
import { collectingStream } from '../helpers/log-lines.js'
import { claimsFor, nowSeconds } from '../helpers/jwt-tokens.js'

// What a valid signature vouches for (issue 27, "Bad input and attacks"): a token from the trusted provider
// is accepted only for this service's audience, within its lifetime (AUTH_JWT_CLOCK_TOLERANCE_S: 30 s
// either way), naming a client, and for the scopes it carries. Through HTTP, on every backend.

/** Beyond the 30 s tolerance, and within it, with room for a slow machine either side. */
const BEYOND = 60
const WITHIN = 15

let provider: IdentityProvider

beforeAll(async () => {
  provider = await startIdentityProvider({ keys: publishedKeyList(await generatePublishedKeys()) })
})

afterAll(async () => {
  await provider?.close()
})

describe.each(backends)('JWT access tokens\' claims on $name', (backend) => {
  let shared: SharedJwtApp
  const sign = (overrides: Record<string, unknown>) => provider.sign(claimsFor(provider, overrides))

  beforeAll(async () => {
    shared = await buildSharedJwtApp(backend, jwtSettingsFor(provider))
  })

  afterAll(async () => {
    await shared?.close()
  })

  describe('when the token was not issued for this service', () => {
    it('then a token of another issuer on the same server, signed with the same keys, is refused', async () => {
      const otherRealm = provider.issuer.replace(/\/realms\/plants$/, '/realms/other')

      expect(otherRealm).not.toBe(provider.issuer)
      await expectRefusedBecause(shared, await sign({ iss: otherRealm }), 200, /^ERR_JWT_CLAIM_VALIDATION_FAILED: unexpected "iss" claim value$/)
    })

    it('then a token for another audience is refused', async () => {
      await expectRefusedBecause(shared, await sign({ aud: ['another-api', 'account'] }), 201, /^ERR_JWT_CLAIM_VALIDATION_FAILED: unexpected "aud" claim value$/)
    })

    it('then a token without an audience is refused', async () => {
      await expectRefusedBecause(shared, await sign({ aud: undefined }), 202, /^ERR_JWT_CLAIM_VALIDATION_FAILED: missing required "aud" claim$/)
    })
  })

  describe('when the token\'s lifetime is judged', () => {
    it('then a token without exp is refused', async () => {
      await expectRefusedBecause(shared, await sign({ exp: undefined }), 210, /^ERR_JWT_CLAIM_VALIDATION_FAILED: missing required "exp" claim$/)
    })

    it('then a token whose exp passed beyond the tolerance is refused, and one whose exp passed within it is accepted', async () => {
      const now = nowSeconds()
      const lifetime = { iat: now - 300, nbf: now - 300 }

      await expectRefusedBecause(shared, await sign({ ...lifetime, exp: now - BEYOND }), 211, /^ERR_JWT_EXPIRED: /)
      await expectAccepted(shared.app, await sign({ ...lifetime, exp: now - WITHIN }), 212)
    })

    it('then a token whose nbf is in the future beyond the tolerance is refused, and one within it is accepted', async () => {
      const now = nowSeconds()

      await expectRefusedBecause(shared, await sign({ nbf: now + BEYOND }), 213, /^ERR_JWT_CLAIM_VALIDATION_FAILED: "nbf" claim timestamp check failed$/)
      await expectAccepted(shared.app, await sign({ nbf: now + WITHIN }), 214)
    })

    it('then a token whose iat is in the future beyond the tolerance is refused, and one within it is accepted', async () => {
      const now = nowSeconds()

      await expectRefusedBecause(shared, await sign({ iat: now + BEYOND, nbf: undefined }), 215, /^"iat" claim timestamp check failed \(it should be in the past\)$/)
      await expectAccepted(shared.app, await sign({ iat: now + WITHIN, nbf: undefined }), 216)
    })
  })

  describe('when the token\'s subject is read', () => {
    it('then a token naming neither sub nor client_id is refused', async () => {
      await expectRefusedBecause(shared, await sign({ sub: undefined }), 220, /^the token names no subject: neither "sub" nor "client_id" is a string$/)
    })

    it('then a token naming only client_id is accepted, as jwt:<client_id>', async () => {
      const response = await expectAccepted(shared.app, await sign({ sub: undefined, client_id: 'svc-inventory' }), 221)
      // Completed-request lines are written at the end of the event-loop turn.
      await new Promise(setImmediate)

      const completed = shared.log.lines().filter((line) => line.msg === 'request completed' && line.reqId === response.headers['x-request-id'])
      expect(completed.map(({ statusCode, tokenName }) => ({ statusCode, tokenName }))).toEqual([{ statusCode: 200, tokenName: 'jwt:svc-inventory' }])
    })
  })

  describe('when the token\'s scopes are read from its scope claim', () => {
    it('then a valid token without plants:write is a 403 insufficient_scope', async () => {
      await expectInsufficientScope(shared.app, await sign({ scope: 'plants:read' }), 230)
    })

    it('then scopes sent as an array of strings are granted', async () => {
      await expectAccepted(shared.app, await sign({ scope: ['plants:read', 'plants:write'] }), 231)
    })

    it('then a claim holding only values the service does not know grants nothing: 403', async () => {
      await expectInsufficientScope(shared.app, await sign({ scope: 'openid profile email plants:writer write:plants' }), 232)
    })
  })

  it('when a verified, remembered token then expires (tolerance 0), then it is refused from then on, logged as ERR_JWT_EXPIRED like any expired token', async () => {
    const log = collectingStream()
    const jwt = new JwtAccessTokens(jwtSettingsFor(provider, { clockToleranceS: 0 }))
    const app = await buildTestApp({ store: await backend.open(), jwt, config: { logLevel: 'debug' }, logStream: log.stream })
    // At least 1.5 s of life left: time enough to be verified, then remembered, on a loaded machine.
    const exp = Math.ceil((Date.now() + 1500) / 1000)
    const token = await sign({ iat: exp - 300, nbf: exp - 300, exp })

    await expectAccepted(app, token, 240)
    await expectAccepted(app, token, 241)
    await sleep(exp * 1000 - Date.now() + 50)

    const refused = await expectRefused(app, token, 242)
    expect(refusalsOf(log, refused)).toEqual([{ level: 20, reason: 'ERR_JWT_EXPIRED: "exp" claim timestamp check failed' }])
  })
})
