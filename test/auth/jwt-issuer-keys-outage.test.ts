import { beforeAll, describe, expect, it } from 'vitest'
import { TEST_TOKEN } from '../helpers/app.js'
import { generateSigningKey, type IdentityProvider, type TestSigningKey } from '../helpers/identity-provider.js'
import { claimsFor } from '../helpers/jwt-tokens.js'
import {
  escaped, expectFailedLine, expectRefused, fetchCounts, getPlants, INFO, MARGIN_MS, provider, RECOVERED, sleep, startJwtApp, timed, TIMINGS, waitFor, WARN
} from './jwt-issuer-keys-fixtures.js'

// An identity provider that cannot be reached never makes a request hang or fail with a 5xx (issue 27),
// with the key set's timings shortened (TIMINGS): the real ones are in test/faults/identity-provider-outage.test.ts.

let rsa: TestSigningKey
let ec: TestSigningKey

beforeAll(async () => {
  [rsa, ec] = await Promise.all([generateSigningKey('RS256', 'rsa-1'), generateSigningKey('ES256', 'ec-2')])
})

const COOLDOWN = TIMINGS.refetchCooldownMs
const LONGEST_WAIT_MS = TIMINGS.fetchTimeoutMs + MARGIN_MS
/** What building the app itself may take, provider aside. */
const BUILD_ALLOWANCE_MS = 1500

interface Outage {
  readonly name: string
  readonly begin: (idp: IdentityProvider) => Promise<void> | void
  readonly end: (idp: IdentityProvider) => Promise<void> | void
  /** The reason the warn line gives. */
  readonly reason: (idp: IdentityProvider) => string | RegExp
  /** Whether the provider sees the fetch's requests (a stopped one does not). */
  readonly seen: boolean
  /** Whether a fetch stays under way until its time-out, so that a known kid must be answered before it ends. */
  readonly holds?: boolean
}

const serveAgain = (idp: IdentityProvider) => { idp.behave('serve') }

const OUTAGES: readonly Outage[] = [
  { name: 'hangs', begin: (idp) => { idp.behave('hang') }, end: serveAgain, seen: true, holds: true, reason: (idp) => `${idp.discoveryUrl} cannot be fetched: it did not answer in time` },
  {
    name: 'answers after the fetch time-out',
    begin: (idp) => { idp.behave('serve', { delayMs: TIMINGS.fetchTimeoutMs + 600 }) },
    end: serveAgain,
    seen: true,
    holds: true,
    reason: (idp) => `${idp.discoveryUrl} cannot be fetched: it did not answer in time`
  },
  { name: 'answers garbage', begin: (idp) => { idp.behave('garbage') }, end: serveAgain, seen: true, reason: (idp) => `${idp.discoveryUrl} did not answer JSON` },
  { name: 'answers 500', begin: (idp) => { idp.behave('error500') }, end: serveAgain, seen: true, reason: (idp) => `${idp.discoveryUrl} answered 500` },
  {
    name: 'resets the connection',
    begin: (idp) => { idp.behave('reset') },
    end: serveAgain,
    seen: true,
    reason: (idp) => new RegExp(`^${escaped(idp.discoveryUrl)} cannot be fetched: [^;]+$`)
  },
  {
    name: 'serves a 1.5 MiB key set',
    begin: (idp) => { idp.behave('huge', { document: 'jwks' }) },
    end: serveAgain,
    seen: true,
    reason: (idp) => `${idp.jwksUrl} answered more than 1048576 bytes`
  },
  {
    name: 'is stopped',
    begin: (idp) => idp.stop(),
    end: (idp) => idp.restart(),
    seen: false,
    reason: (idp) => `${idp.discoveryUrl} cannot be fetched: connect ECONNREFUSED 127.0.0.1:${idp.port}`
  }
]

describe.each(OUTAGES)('While the identity provider $name, with its keys cached', (outage) => {
  it('then a known key id is accepted at once, an unknown one refused with 401 within the fetch time-out, the streak logged once, and its end once', async () => {
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp)
    expect((await getPlants(app, await idp.sign(claimsFor(idp)))).statusCode).toBe(200)
    // The new key is published before the outage: only the outage can keep it out.
    idp.publish([rsa, ec])
    await outage.begin(idp)
    await sleep(COOLDOWN + 20)
    const before = fetchCounts(idp)

    let unknownAnswered = false
    const unknownKid = timed(getPlants(app, await idp.sign(claimsFor(idp), { key: ec })).finally(() => { unknownAnswered = true }))
    await sleep(50)
    const knownKid = await timed(getPlants(app, await idp.sign(claimsFor(idp), { key: rsa })))
    // While the fetch is held, the known kid must not wait for it: answered before the unknown one.
    if (outage.holds === true) expect(unknownAnswered).toBe(false)
    const joining = await timed(getPlants(app, await idp.sign(claimsFor(idp), { key: ec })))
    const refused = await unknownKid

    expect(knownKid.value.statusCode).toBe(200)
    expect(knownKid.elapsedMs).toBeLessThan(TIMINGS.fetchTimeoutMs)
    for (const { value, elapsedMs } of [refused, joining]) {
      expectRefused(value)
      expect(elapsedMs).toBeLessThan(LONGEST_WAIT_MS)
    }
    // At least the first refused request's fetch (a loaded machine may let the cooldown pass before the third).
    const afterFirst = fetchCounts(idp).discovery
    if (outage.seen) expect(afterFirst).toBeGreaterThan(before.discovery)

    // A second failing fetch of the same streak is not logged again.
    await sleep(COOLDOWN + 20)
    const again = await timed(getPlants(app, await idp.sign(claimsFor(idp), { key: ec })))
    expectRefused(again.value)
    expect(again.elapsedMs).toBeLessThan(LONGEST_WAIT_MS)
    if (outage.seen) expect(fetchCounts(idp).discovery).toBeGreaterThan(afterFirst)
    expect((await getPlants(app, TEST_TOKEN)).statusCode).toBe(200)

    await outage.end(idp)
    await sleep(COOLDOWN + 20)
    expect((await getPlants(app, await idp.sign(claimsFor(idp), { key: ec }))).statusCode).toBe(200)

    const lines = keySetLines()
    expect(lines).toHaveLength(2)
    expectFailedLine(lines[0], idp, outage.reason(idp))
    expect(lines[1]).toEqual({ level: INFO, msg: RECOVERED, issuer: idp.issuer })
  })
})

describe('A long outage', () => {
  it('when background refreshes fail again and again, then the streak is logged once, and once more when a refresh works again', async () => {
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp, { timings: { refreshMs: 100 } })
    const cached = await idp.sign(claimsFor(idp))
    expect((await getPlants(app, cached)).statusCode).toBe(200)

    idp.behave('error500')
    const failingSince = fetchCounts(idp).discovery
    await waitFor(() => fetchCounts(idp).discovery >= failingSince + 5, 3000, 'five failing background refreshes')
    expect((await getPlants(app, await idp.sign(claimsFor(idp)))).statusCode).toBe(200)
    expect(keySetLines().map(({ level }) => level)).toEqual([WARN])

    idp.behave('serve')
    await waitFor(() => keySetLines().length === 2, 3000, 'a background refresh that works')
    await sleep(300)
    const lines = keySetLines()
    expect(lines).toHaveLength(2)
    // The outage may begin between a refresh's two requests: either document is the one that failed first.
    expectFailedLine(lines[0], idp, new RegExp(`^(${escaped(idp.discoveryUrl)}|${escaped(idp.jwksUrl)}) answered 500$`))
    expect(lines[1]).toEqual({ level: INFO, msg: RECOVERED, issuer: idp.issuer })
  })
})

describe('One fetch\'s time-out', () => {
  it('when the discovery document is slow and the key set then hangs, then one time-out covers both and the request is refused within it', async () => {
    const fetchTimeoutMs = 1000
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp, { timings: { fetchTimeoutMs } })
    idp.publish([rsa, ec])
    idp.behave('serve', { document: 'discovery', delayMs: 900 })
    idp.behave('hang', { document: 'jwks' })
    await sleep(COOLDOWN + 20)

    const refused = await timed(getPlants(app, await idp.sign(claimsFor(idp), { key: ec })))

    expectRefused(refused.value)
    // Two time-outs, one per document, would take 900 ms + 1000 ms.
    expect(refused.elapsedMs).toBeLessThan(fetchTimeoutMs + MARGIN_MS)
    expect(fetchCounts(idp)).toEqual({ discovery: 2, jwks: 2 })
    expectFailedLine(keySetLines()[0], idp, `${idp.jwksUrl} cannot be fetched: it did not answer in time`)
  })
})

describe('Starting while the identity provider is down', () => {
  it.each([
    ['stopped', (idp: IdentityProvider) => idp.stop(), (idp: IdentityProvider) => idp.restart()],
    ['hanging', (idp: IdentityProvider) => { idp.behave('hang') }, (idp: IdentityProvider) => { idp.behave('serve') }]
  ] as const)('when it is %s, then the service starts within the fetch time-out, serves service tokens, and accepts JWTs once the provider is back, without a restart',
    async (_state, begin, end) => {
      const idp = await provider([rsa])
      await begin(idp)

      const started = await timed(startJwtApp(idp))
      const { app, keySetLines, keySetLineTimes } = started.value
      const token = await idp.sign(claimsFor(idp))

      // Building the app takes its own time on a loaded machine: the provider may add no more than one fetch's time-out,
      // from the moment it received the request to the warn line of the service giving up on it (the rest of the build,
      // app.ready() included, took most of a second more on this machine at load 10).
      expect(started.elapsedMs).toBeLessThan(LONGEST_WAIT_MS + BUILD_ALLOWANCE_MS)
      const hungAt = idp.fetches.discovery[0]
      const gaveUpAt = keySetLineTimes()[0]
      if (hungAt !== undefined) expect((gaveUpAt ?? Number.POSITIVE_INFINITY) - hungAt).toBeLessThan(LONGEST_WAIT_MS)
      expect((await getPlants(app, TEST_TOKEN)).statusCode).toBe(200)
      const refused = await timed(getPlants(app, token))
      expectRefused(refused.value)
      expect(refused.elapsedMs).toBeLessThan(LONGEST_WAIT_MS)

      await end(idp)
      await sleep(COOLDOWN + 20)
      expect((await getPlants(app, token)).statusCode).toBe(200)
      expect(keySetLines().map(({ level }) => level)).toEqual([WARN, INFO])
    })
})
