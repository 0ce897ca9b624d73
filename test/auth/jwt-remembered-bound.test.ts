import { describe, expect, it } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { generateSigningKey, startIdentityProvider } from '../helpers/identity-provider.js'
import { jwtSettingsFor } from '../helpers/jwt-service.js'
import { claimsFor } from '../helpers/jwt-tokens.js'

/** docs/reference/jwt.md: at most 10,000 verified tokens are remembered; the oldest go first. */
const REMEMBERED = 10_000

describe('The memory of verified JWTs', () => {
  it('keeps the 10,000 verified last: the 10,001st forgets the first, which is then verified again', { timeout: 60_000 }, async () => {
    const key = await generateSigningKey('EdDSA', 'bound')
    const provider = await startIdentityProvider({ keys: [key] })
    try {
      const jwt = new JwtAccessTokens(jwtSettingsFor(provider))
      await jwt.start({ fetchFailed: () => {}, fetchRecovered: () => {} })
      const tokens = await Promise.all(Array.from({ length: REMEMBERED + 1 }, (_, index) => provider.sign(claimsFor(provider, { sub: `client-${index}` }))))
      let verified = 0
      jwt.observer = { keySetFetched: () => {}, verified: () => { verified++ } }
      const refusals: string[] = []

      for (const token of tokens.slice(0, REMEMBERED)) await jwt.identify(token, (reason) => refusals.push(reason))
      const allRemembered = tokens.slice(0, REMEMBERED).every((token) => jwt.remembered(token) !== undefined)
      await jwt.identify(tokens[REMEMBERED] as string, (reason) => refusals.push(reason))

      expect(refusals).toEqual([])
      expect(verified).toBe(REMEMBERED + 1)
      expect(allRemembered).toBe(true)
      expect(jwt.remembered(tokens[0] as string)).toBeUndefined()
      expect(jwt.remembered(tokens[1] as string)?.name).toBe('jwt:client-1')
      expect(jwt.remembered(tokens[REMEMBERED] as string)?.name).toBe(`jwt:client-${REMEMBERED}`)
      expect((await jwt.identify(tokens[0] as string, (reason) => refusals.push(reason)))?.name).toBe('jwt:client-0')
      expect(verified).toBe(REMEMBERED + 2)
      jwt.stop()
    } finally {
      await provider.close()
    }
  })
})
