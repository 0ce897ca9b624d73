import { beforeAll, describe, expect, it } from 'vitest'
import { backends, bearer, TEST_TOKEN } from '../helpers/app.js'
import { generateSigningKey, type TestSigningKey } from '../helpers/identity-provider.js'
import { auth0AccessToken, claimsFor } from '../helpers/jwt-tokens.js'
import {
  expectRefused, fetchCounts, fetchFailedMessage, getPlants, INFO, provider, RECOVERED, sleep, startJwtApp, TIMINGS, waitFor, WARN
} from './jwt-issuer-keys-fixtures.js'

// The identity provider's key set as the service keeps it (issue 27, API.md "Keys"), through HTTP, with the
// documented 5 s / 30 s / 10 min shortened (TIMINGS). Outages: jwt-issuer-keys-outage.test.ts.

let rsa: TestSigningKey
let ec: TestSigningKey
let ed: TestSigningKey

beforeAll(async () => {
  [rsa, ec, ed] = await Promise.all([generateSigningKey('RS256', 'rsa-1'), generateSigningKey('ES256', 'ec-2'), generateSigningKey('EdDSA', 'ed-3')])
})

const COOLDOWN = TIMINGS.refetchCooldownMs

describe('Finding the identity provider\'s keys', () => {
  it('when the service starts, then it fetches the discovery document once and the key set once, and a JWT is accepted', async () => {
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp)

    expect(fetchCounts(idp)).toEqual({ discovery: 1, jwks: 1 })
    expect((await getPlants(app, await idp.sign(claimsFor(idp)))).statusCode).toBe(200)
    expect(fetchCounts(idp)).toEqual({ discovery: 1, jwks: 1 })
    expect(keySetLines()).toEqual([])
  })

  it('when AUTH_JWT_JWKS_URL names the key set, then no discovery document is fetched', async () => {
    const idp = await provider([rsa])
    const { app } = await startJwtApp(idp, { jwksUrl: idp.jwksUrl })

    expect((await getPlants(app, await idp.sign(claimsFor(idp)))).statusCode).toBe(200)
    expect(fetchCounts(idp)).toEqual({ discovery: 0, jwks: 1 })
  })

  it('when the issuer ends in a slash (Auth0), then discovery is found at the origin\'s /.well-known/openid-configuration', async () => {
    const idp = await provider([rsa], { issuerPath: '', trailingSlash: true, jwksPath: '/.well-known/jwks.json' })
    const { app } = await startJwtApp(idp)

    expect(idp.issuer).toBe(`http://127.0.0.1:${idp.port}/`)
    expect(idp.discoveryUrl).toBe(`http://127.0.0.1:${idp.port}/.well-known/openid-configuration`)
    expect((await getPlants(app, await auth0AccessToken(idp, { clientId: 'nursery', scopes: ['plants:read'] }))).statusCode).toBe(200)
    expect(fetchCounts(idp)).toEqual({ discovery: 1, jwks: 1 })
  })

  it('when the discovery document names another issuer, then its keys are never used and the failure is logged once, saying why', async () => {
    const idp = await provider([rsa], { discoveryIssuer: 'https://elsewhere.example/realms/plants' })
    const { app, keySetLines } = await startJwtApp(idp)
    const token = await idp.sign(claimsFor(idp))

    expectRefused(await getPlants(app, token))
    await sleep(COOLDOWN + 20)
    expectRefused(await getPlants(app, token))

    // The start's fetch and at least the one after the cooldown (the first request may have made one too).
    expect(fetchCounts(idp).discovery).toBeGreaterThanOrEqual(2)
    expect(fetchCounts(idp).jwks).toBe(0)
    expect(keySetLines()).toEqual([{
      level: WARN,
      msg: fetchFailedMessage(`the discovery document at ${idp.discoveryUrl} names the issuer "https://elsewhere.example/realms/plants", not AUTH_JWT_ISSUER`),
      issuer: idp.issuer
    }])
    expect((await getPlants(app, TEST_TOKEN)).statusCode).toBe(200)
  })
})

describe('Keys the provider rotates', () => {
  it('when a token names a key published after the start, then within the cooldown it is refused without a fetch, and after it one fetch accepts it', async () => {
    // A longer cooldown than TIMINGS', so that "within" holds on a loaded machine.
    const cooldownMs = 1500
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp, { timings: { refetchCooldownMs: cooldownMs } })
    const startedAt = idp.fetches.jwks[0] as number
    idp.publish([ec, rsa])
    const token = await idp.sign(claimsFor(idp), { key: ec })

    expectRefused(await getPlants(app, token))
    expect(Date.now() - startedAt).toBeLessThan(cooldownMs)
    expect(fetchCounts(idp)).toEqual({ discovery: 1, jwks: 1 })

    await sleep(startedAt + cooldownMs + 20 - Date.now())
    expect((await getPlants(app, token)).statusCode).toBe(200)
    expect(fetchCounts(idp)).toEqual({ discovery: 2, jwks: 2 })
    expect((await getPlants(app, await idp.sign(claimsFor(idp), { key: rsa }))).statusCode).toBe(200)
    expect(fetchCounts(idp)).toEqual({ discovery: 2, jwks: 2 })
    expect(keySetLines()).toEqual([])
  })

  it('when the cooldown has passed, then 50 tokens with made-up key ids at once make exactly one fetch', async () => {
    // A cooldown long enough that all 50 requests fall in it on a loaded machine.
    const cooldownMs = 1000
    const idp = await provider([rsa])
    const { app } = await startJwtApp(idp, { timings: { refetchCooldownMs: cooldownMs } })
    const tokens = await Promise.all(Array.from({ length: 50 }, (_, index) => idp.sign(claimsFor(idp), { header: { kid: `made-up-${index}` } })))
    await sleep(cooldownMs + 20)

    const responses = await Promise.all(tokens.map((token) => getPlants(app, token)))

    for (const response of responses) expectRefused(response)
    expect(fetchCounts(idp)).toEqual({ discovery: 2, jwks: 2 })
  })

  it('when the provider removes a key, then after the next background refresh its tokens are refused, even one verified before', async () => {
    const idp = await provider([rsa, ed])
    const { app } = await startJwtApp(idp, { timings: { refreshMs: 250, refetchCooldownMs: 60_000 } })
    const verifiedBefore = await idp.sign(claimsFor(idp), { key: ed })
    expect((await getPlants(app, verifiedBefore)).statusCode).toBe(200)
    expect((await getPlants(app, verifiedBefore)).statusCode).toBe(200)

    idp.publish([rsa])
    const removedAt = Date.now()
    await waitFor(() => idp.fetches.jwks.some((at) => at > removedAt), 2000, 'a background refresh of the key set')
    // The refresh's answer is installed once it has been read: until then the token may still pass.
    const deadline = Date.now() + 2000
    let answer = await getPlants(app, verifiedBefore)
    while (answer.statusCode === 200 && Date.now() < deadline) {
      await sleep(20)
      answer = await getPlants(app, verifiedBefore)
    }

    expectRefused(answer)
    expectRefused(await getPlants(app, await idp.sign(claimsFor(idp), { key: ed })))
    expect((await getPlants(app, await idp.sign(claimsFor(idp), { key: rsa }))).statusCode).toBe(200)
  })

  it('when 20 requests bring the same new token at once, then all are accepted after one fetch and one verification', async () => {
    const idp = await provider([rsa])
    const { app, verifications } = await startJwtApp(idp)
    idp.publish([rsa, ec])
    const token = await idp.sign(claimsFor(idp), { key: ec })
    await sleep(COOLDOWN + 20)

    const responses = await Promise.all(Array.from({ length: 20 }, () => getPlants(app, token)))

    expect(responses.map((response) => response.statusCode)).toEqual(Array.from({ length: 20 }, () => 200))
    expect(fetchCounts(idp)).toEqual({ discovery: 2, jwks: 2 })
    expect(verifications).toEqual({ accepted: 1, refused: 0 })
  })
})

describe.each(backends)('Rotation and outage on the $name backend', (backend) => {
  it('when a key is rotated in, then the provider stops and comes back, then JWT writes keep working with cached keys, new keys wait for it, and each change is logged once', async () => {
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp, { store: await backend.open() })
    const write = (token: string, id: number) => app.inject({
      method: 'POST', url: '/plants', headers: { ...bearer(token), 'content-type': 'application/json' }, payload: { id, name: `Fern ${id}` }
    })

    idp.publish([ec, rsa])
    await sleep(COOLDOWN + 20)
    expect((await write(await idp.sign(claimsFor(idp), { key: ec }), 1)).statusCode).toBe(200)

    await idp.stop()
    idp.publish([ed, ec, rsa])
    await sleep(COOLDOWN + 20)
    expect((await write(await idp.sign(claimsFor(idp), { key: ec }), 2)).statusCode).toBe(200)
    expectRefused(await write(await idp.sign(claimsFor(idp), { key: ed }), 3))
    await sleep(COOLDOWN + 20)
    expectRefused(await write(await idp.sign(claimsFor(idp), { key: ed }), 3))

    await idp.restart()
    await sleep(COOLDOWN + 20)
    expect((await write(await idp.sign(claimsFor(idp), { key: ed }), 3)).statusCode).toBe(200)

    const listed = await getPlants(app, TEST_TOKEN)
    expect(listed.json()).toEqual([{ id: 1, name: 'Fern 1' }, { id: 2, name: 'Fern 2' }, { id: 3, name: 'Fern 3' }])
    expect(keySetLines()).toEqual([
      { level: WARN, msg: fetchFailedMessage(`${idp.discoveryUrl} cannot be fetched: connect ECONNREFUSED 127.0.0.1:${idp.port}`), issuer: idp.issuer },
      { level: INFO, msg: RECOVERED, issuer: idp.issuer }
    ])
  })
})
