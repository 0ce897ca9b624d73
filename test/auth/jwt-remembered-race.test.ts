import { afterEach, describe, expect, it } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { generateSigningKey, startIdentityProvider } from '../helpers/identity-provider.js'
import { jwtSettingsFor } from '../helpers/jwt-service.js'
import { claimsFor } from '../helpers/jwt-tokens.js'

// Were a verification in flight while a fetch installs a changed key set remembered afterwards, a token
// signed by a key the provider removed would stay accepted until its exp. WebCrypto's verify is held (and
// then run as it is) so that the change lands in between.

const subtle = globalThis.crypto.subtle
const originalVerify = subtle.verify.bind(subtle)

afterEach(() => { subtle.verify = originalVerify })

describe('A verification in flight while the key set changes', () => {
  it('when the key that signed the token is removed while its signature is being checked, then the token is not remembered', async () => {
    const [removed, kept] = await Promise.all([generateSigningKey('RS256', 'removed'), generateSigningKey('RS256', 'kept')])
    const provider = await startIdentityProvider({ keys: [removed, kept] })
    try {
      const jwt = new JwtAccessTokens(jwtSettingsFor(provider), { fetchTimeoutMs: 2000, refetchCooldownMs: 0, refreshMs: 600_000 })
      await jwt.start({ fetchFailed: () => {}, fetchRecovered: () => {} })
      const token = await provider.sign(claimsFor(provider), { key: removed })
      const unknownKid = await provider.sign(claimsFor(provider), { key: kept, header: { kid: 'not-yet-published' } })

      // Hold the first signature check until the key set has changed.
      let release: () => void = () => {}
      const gate = new Promise<void>((resolve) => { release = resolve })
      let holding: () => void = () => {}
      const held = new Promise<void>((resolve) => { holding = resolve })
      let first = true
      const verify: typeof subtle.verify = async (algorithm, key, signature, data) => {
        if (first) {
          first = false
          holding()
          await gate
        }
        return originalVerify(algorithm, key, signature, data)
      }
      subtle.verify = verify

      const verdict = jwt.identify(token, () => {})
      await held
      provider.publish([kept])
      // An unknown kid makes the service fetch the set: it no longer holds the removed key.
      expect(await jwt.identify(unknownKid, () => {})).toBeUndefined()
      release()
      await verdict

      expect(jwt.remembered(token)).toBeUndefined()
      jwt.stop()
    } finally {
      await provider.close()
    }
  })
})
