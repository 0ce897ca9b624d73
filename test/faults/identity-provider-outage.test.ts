import { setTimeout as sleep } from 'node:timers/promises'
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { generateSigningKey, startIdentityProvider, type IdentityProvider, type TestSigningKey } from '../helpers/identity-provider.js'
import { claimsFor, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'
import { startServer } from '../helpers/server-process.js'
import { keySetLines, untilKeySetLines } from '../helpers/key-set-lines.js'

// The built server with the documented key-set timings (API.md "Keys"): a fetch gives up after 5 s, an
// unknown key id makes a fetch at most once every 30 s. The shortened timings are in test/auth/jwt-issuer-keys*.

const FETCH_TIMEOUT_MS = 5000
const REFETCH_COOLDOWN_MS = 30_000
const MARGIN_MS = 1000
const SERVICE_TOKEN = 'plantstore-faults-idp-token-7d2e9b'

let rsa: TestSigningKey
let ec: TestSigningKey

beforeAll(async () => {
  [rsa, ec] = await Promise.all([generateSigningKey('RS256', 'rsa-1'), generateSigningKey('ES256', 'ec-2')])
})

async function provider (): Promise<IdentityProvider> {
  const idp = await startIdentityProvider({ keys: [rsa] })
  onTestFinished(() => idp.close())
  return idp
}

function serverEnv (idp: IdentityProvider): Record<string, string> {
  return { DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: SERVICE_TOKEN, AUTH_JWT_ISSUER: idp.issuer, AUTH_JWT_AUDIENCE: TEST_AUDIENCE }
}

/** GET /plants with `token`: its status and how long the answer took. */
async function getPlants (baseUrl: string, token: string): Promise<{ status: number, elapsedMs: number }> {
  const started = performance.now()
  const response = await fetch(`${baseUrl}/plants`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(15_000) })
  await response.arrayBuffer()
  return { status: response.status, elapsedMs: performance.now() - started }
}

async function untilPast (sinceMs: number, ms: number): Promise<void> {
  const left = sinceMs + ms - Date.now()
  if (left > 0) await sleep(left)
}

function failedLine (reason: string): { level: number, msg: string } {
  return {
    level: 40,
    msg: `cannot fetch the identity provider's keys (${reason}); JWTs signed with keys fetched before keep working, and service tokens are unaffected`
  }
}

const RECOVERED = { level: 30, msg: 'the identity provider\'s keys are fetched again' }

describe('The server while the identity provider is out (real key-set timings)', () => {
  it('when the provider hangs, then a JWT with an unknown key id gets 401 within the 5 s fetch time-out, and one with a cached key id 200 meanwhile',
    { timeout: 60_000 }, async () => {
      const idp = await provider()
      const server = await startServer(serverEnv(idp))
      expect((await getPlants(server.baseUrl, await idp.sign(claimsFor(idp)))).status).toBe(200)
      idp.publish([rsa, ec])
      idp.behave('hang')
      // The start's fetch began before the provider saw it: past this, an unknown key id may make a fetch.
      await untilPast(idp.fetches.discovery[0] as number, REFETCH_COOLDOWN_MS + 200)

      const unknownKid = getPlants(server.baseUrl, await idp.sign(claimsFor(idp), { key: ec }))
      await sleep(500)
      const cachedKid = await getPlants(server.baseUrl, await idp.sign(claimsFor(idp), { key: rsa }))
      const refused = await unknownKid

      expect(cachedKid.status).toBe(200)
      expect(cachedKid.elapsedMs).toBeLessThan(MARGIN_MS)
      expect(refused.status).toBe(401)
      expect(refused.elapsedMs).toBeLessThanOrEqual(FETCH_TIMEOUT_MS + MARGIN_MS)
      expect(refused.elapsedMs).toBeGreaterThanOrEqual(FETCH_TIMEOUT_MS - MARGIN_MS)
      expect({ discovery: idp.fetches.discovery.length, jwks: idp.fetches.jwks.length }).toEqual({ discovery: 2, jwks: 1 })
      await untilKeySetLines(server, 1)
      expect(keySetLines(server)).toEqual([failedLine(`${idp.discoveryUrl} cannot be fetched: it did not answer in time`)])
    })

  it('when the provider is down at the start, then the server starts, serves service tokens, logs the failure once, and accepts JWTs 30 s after its last attempt once the provider is back',
    { timeout: 60_000 }, async () => {
      const idp = await provider()
      await idp.stop()
      const server = await startServer(serverEnv(idp))
      // The start's fetch was attempted before the server listened.
      const listenedAt = Date.now()
      const token = await idp.sign(claimsFor(idp))

      expect((await getPlants(server.baseUrl, SERVICE_TOKEN)).status).toBe(200)
      expect((await getPlants(server.baseUrl, token)).status).toBe(401)
      await untilKeySetLines(server, 1)
      expect(keySetLines(server)).toEqual([failedLine(`${idp.discoveryUrl} cannot be fetched: connect ECONNREFUSED 127.0.0.1:${idp.port}`)])

      await idp.restart()
      await untilPast(listenedAt, REFETCH_COOLDOWN_MS - 5000)
      expect((await getPlants(server.baseUrl, token)).status).toBe(401)
      expect({ discovery: idp.fetches.discovery.length, jwks: idp.fetches.jwks.length }).toEqual({ discovery: 0, jwks: 0 })

      await untilPast(listenedAt, REFETCH_COOLDOWN_MS + 500)
      expect((await getPlants(server.baseUrl, token)).status).toBe(200)
      expect({ discovery: idp.fetches.discovery.length, jwks: idp.fetches.jwks.length }).toEqual({ discovery: 1, jwks: 1 })
      expect(server.child.exitCode).toBeNull()
      await untilKeySetLines(server, 2)
      expect(keySetLines(server)).toEqual([failedLine(`${idp.discoveryUrl} cannot be fetched: connect ECONNREFUSED 127.0.0.1:${idp.port}`), RECOVERED])
    })
})
