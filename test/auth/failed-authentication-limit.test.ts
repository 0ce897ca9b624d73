import { describe, expect, it } from 'vitest'
import { FAILURE_WINDOW_MS, FailedAuthenticationLimit, MAX_FOLLOWED_ADDRESSES } from '../../src/auth/failed-authentication-limit.js'
import { bearer, buildTestApp, expectError, TEST_TOKEN } from '../helpers/app.js'

const ADMIN_TOKEN = 'plantstore-admin-token-9b2d41'
const TOKENS = [`name=ops;scopes=admin;${ADMIN_TOKEN}`, TEST_TOKEN]

describe('Failed authentications limited per client address', () => {
  it('when one address had AUTH_FAILURE_LIMIT_PER_MINUTE 401s, then its every request needing a token is a 429 with Retry-After, a valid token included', async () => {
    const app = await buildTestApp({ tokens: TOKENS, config: { authFailureLimitPerMinute: 5 } })
    const from = (remoteAddress: string, headers: Record<string, string> = {}) =>
      ({ method: 'GET' as const, url: '/plants/1', remoteAddress, headers })

    const statuses = []
    for (let attempt = 0; attempt < 5; attempt++) {
      statuses.push((await app.inject(from('203.0.113.7', bearer(`guess-${attempt}`)))).statusCode)
    }
    const limited = await app.inject(from('203.0.113.7', bearer('guess-5')))
    const validTokenFromThere = await app.inject(from('203.0.113.7', bearer()))
    const noTokenFromThere = await app.inject({ method: 'POST', url: '/admin/tokens/%zz', remoteAddress: '203.0.113.7' })
    const validTokenFromElsewhere = await app.inject(from('203.0.113.8', bearer()))
    const openRouteFromThere = await app.inject({ method: 'GET', url: '/healthz', remoteAddress: '203.0.113.7' })

    expect(statuses).toEqual([401, 401, 401, 401, 401])
    for (const response of [limited, validTokenFromThere, noTokenFromThere]) {
      expectError(response, 429, /^too many failed authentications from this address, retry in \d+ s$/)
      const retryAfter = Number(response.headers['retry-after'])
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
      expect(response.json().message).toBe(`too many failed authentications from this address, retry in ${retryAfter} s`)
    }
    expect(validTokenFromElsewhere.statusCode).toBe(404)
    expect(openRouteFromThere.statusCode).toBe(200)
  })

  it('when TRUST_PROXY is set, then the address counted is the client\'s from X-Forwarded-For, not the proxy\'s', async () => {
    const app = await buildTestApp({ tokens: TOKENS, config: { authFailureLimitPerMinute: 2, trustProxy: '127.0.0.1' } })
    const through = (client: string, token: string) => app.inject({
      method: 'GET', url: '/admin/tokens', remoteAddress: '127.0.0.1', headers: { ...bearer(token), 'x-forwarded-for': client }
    })

    await through('198.51.100.1', 'wrong-1')
    await through('198.51.100.1', 'wrong-2')

    expect((await through('198.51.100.1', ADMIN_TOKEN)).statusCode).toBe(429)
    expect((await through('198.51.100.2', ADMIN_TOKEN)).statusCode).toBe(200)
  })

  it('when a token lacks the scope, then its 403s are not counted as failed authentications', async () => {
    const app = await buildTestApp({ tokens: TOKENS, config: { authFailureLimitPerMinute: 1 } })

    const statuses = []
    for (let attempt = 0; attempt < 3; attempt++) {
      statuses.push((await app.inject({ method: 'GET', url: '/admin/tokens', remoteAddress: '203.0.113.9', headers: bearer() })).statusCode)
    }

    expect(statuses).toEqual([403, 403, 403])
  })

  it('when AUTH_FAILURE_LIMIT_PER_MINUTE is 0, then nothing is limited', async () => {
    const app = await buildTestApp({ config: { authFailureLimitPerMinute: 0 } })

    const statuses = new Set<number>()
    for (let attempt = 0; attempt < 300; attempt++) {
      statuses.add((await app.inject({ method: 'GET', url: '/plants', headers: bearer(`guess-${attempt}`) })).statusCode)
    }

    expect([...statuses]).toEqual([401])
  })
})

describe('FailedAuthenticationLimit', () => {
  it('when the window of an address ends, then it may try again, with a window of its own', () => {
    let now = 1_000_000
    const limit = new FailedAuthenticationLimit(3, () => now)

    for (let failure = 0; failure < 3; failure++) limit.recordFailure('192.0.2.1')
    now += 1
    limit.recordFailure('192.0.2.2')
    const whileLimited = limit.retryAfterSeconds('192.0.2.1')
    now += FAILURE_WINDOW_MS - 1

    expect(whileLimited).toBe(60)
    expect(limit.retryAfterSeconds('192.0.2.1')).toBeUndefined()
    limit.recordFailure('192.0.2.1')
    expect(limit.retryAfterSeconds('192.0.2.1')).toBeUndefined()
    expect(limit.followedAddresses).toBe(2)
    now += 1
    limit.recordFailure('192.0.2.3')
    expect(limit.followedAddresses).toBe(2)
  })

  it('counts an IPv6 client by its /64 and an IPv4-mapped one as its IPv4 address', () => {
    const limit = new FailedAuthenticationLimit(2, () => 0)

    limit.recordFailure('2001:db8:0:1::1')
    limit.recordFailure('2001:0db8:0000:0001:ffff:ffff:ffff:ffff')
    limit.recordFailure('::ffff:192.0.2.5')
    limit.recordFailure('192.0.2.5')

    expect(limit.retryAfterSeconds('2001:db8:0:1:abcd::9')).toBe(60)
    expect(limit.retryAfterSeconds('2001:db8:0:2::1')).toBeUndefined()
    expect(limit.retryAfterSeconds('192.0.2.5')).toBe(60)
    expect(limit.followedAddresses).toBe(2)
  })

  it('when an attacker cycles through addresses, then the addresses followed stay bounded', () => {
    const limit = new FailedAuthenticationLimit(100, () => 0)

    for (let address = 0; address < MAX_FOLLOWED_ADDRESSES + 5000; address++) {
      limit.recordFailure(`10.${(address >> 16) & 255}.${(address >> 8) & 255}.${address & 255}`)
    }

    expect(limit.followedAddresses).toBe(MAX_FOLLOWED_ADDRESSES)
  })
  it('when an attacker has filled the table, then its further addresses are still limited, counted by their network', () => {
    const limit = new FailedAuthenticationLimit(100, () => 0)
    for (let address = 0; address < MAX_FOLLOWED_ADDRESSES; address++) {
      limit.recordFailure(`2001:db8:${(address >> 16).toString(16)}:${(address & 0xffff).toString(16)}::1`)
    }

    for (let host = 0; host < 100; host++) limit.recordFailure(`2001:db8:ffff:${host.toString(16)}::1`)

    expect({
      followed: limit.followedAddresses,
      unseenHostOfThatNetwork: limit.retryAfterSeconds('2001:db8:ffff:abcd::7'),
      otherNetwork: limit.retryAfterSeconds('2001:db9::1'),
      followedButBelowTheLimit: limit.retryAfterSeconds('2001:db8:0:1::1')
    }).toEqual({ followed: MAX_FOLLOWED_ADDRESSES, unseenHostOfThatNetwork: 60, otherNetwork: undefined, followedButBelowTheLimit: undefined })
  })
})
