import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it, onTestFinished } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { generateSigningKey, startIdentityProvider } from '../helpers/identity-provider.js'
import { jwtSettingsFor } from '../helpers/jwt-service.js'

/** V8's collector, called at will: what a busy service does to short-lived objects, only sooner. */
function collector (): () => void {
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as () => void
}

describe('The time-out of a key-set fetch', () => {
  it('when the provider hangs and garbage is collected meanwhile, then the fetch still gives up at its time-out', async () => {
    const provider = await startIdentityProvider({ keys: [await generateSigningKey('ES256', 'gc')] })
    onTestFinished(() => provider.close())
    provider.behave('hang')
    const gc = collector()
    const collecting = setInterval(gc, 10)
    onTestFinished(() => { clearInterval(collecting) })
    const jwt = new JwtAccessTokens(jwtSettingsFor(provider), { fetchTimeoutMs: 300, refetchCooldownMs: 30_000, refreshMs: 600_000 })
    onTestFinished(() => { jwt.stop() })
    const failures: string[] = []

    const started = performance.now()
    const ended = await Promise.race([
      jwt.start({ fetchFailed: (reason) => failures.push(reason), fetchRecovered: () => {} }).then(() => performance.now() - started),
      new Promise<string>((resolve) => setTimeout(() => resolve('still waiting after 3 s'), 3000))
    ])

    expect(typeof ended === 'number' && ended < 2000 ? 'ended in time' : ended).toBe('ended in time')
    expect(failures).toEqual([`${provider.discoveryUrl} cannot be fetched: it did not answer in time`])
  })

  it('when the app stops while a fetch hangs, then the fetch ends at once, and no failure is logged', async () => {
    const provider = await startIdentityProvider({ keys: [await generateSigningKey('ES256', 'stop')] })
    onTestFinished(() => provider.close())
    provider.behave('hang')
    const jwt = new JwtAccessTokens(jwtSettingsFor(provider), { fetchTimeoutMs: 10_000, refetchCooldownMs: 30_000, refreshMs: 600_000 })
    const failures: string[] = []
    const starting = jwt.start({ fetchFailed: (reason) => failures.push(reason), fetchRecovered: () => {} })
    while (provider.fetches.discovery.length === 0) await new Promise((resolve) => setTimeout(resolve, 10))

    const stopped = performance.now()
    jwt.stop()
    await starting

    expect(performance.now() - stopped).toBeLessThan(1000)
    expect(failures).toEqual([])
  })
})
