import { beforeAll, describe, expect, it } from 'vitest'
import { generateSigningKey, type TestSigningKey } from '../helpers/identity-provider.js'
import { claimsFor } from '../helpers/jwt-tokens.js'
import { escaped, expectFailedLine, expectRefused, fetchCounts, getPlants, provider, sleep, startJwtApp, TIMINGS } from './jwt-issuer-keys-fixtures.js'

// A key set that parses as JSON but whose keys are not keys is garbage too: it must not replace the working one.

let rsa: TestSigningKey
let ec: TestSigningKey

beforeAll(async () => {
  [rsa, ec] = await Promise.all([generateSigningKey('RS256', 'rsa-1'), generateSigningKey('ES256', 'ec-2')])
})

describe('A key set that is JSON but whose keys are not keys', () => {
  it.each([
    ['an RSA key without its modulus and exponent', [{ kty: 'RSA', kid: 'rsa-1', alg: 'RS256', use: 'sig' }]],
    ['an empty object', [{}]],
    ['no key at all', []]
  ] as const)('when the provider serves %s, then the set is refused like garbage: the cached keys keep working and the failure is logged once', async (_what, keys) => {
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp)
    expect((await getPlants(app, await idp.sign(claimsFor(idp)))).statusCode).toBe(200)
    idp.publish(keys)
    await sleep(TIMINGS.refetchCooldownMs + 20)

    expectRefused(await getPlants(app, await idp.sign(claimsFor(idp), { key: ec })))

    expect(fetchCounts(idp)).toEqual({ discovery: 2, jwks: 2 })
    expect((await getPlants(app, await idp.sign(claimsFor(idp), { key: rsa }))).statusCode).toBe(200)
    const lines = keySetLines()
    expect(lines).toHaveLength(1)
    expectFailedLine(lines[0], idp, new RegExp(`^the key set at ${escaped(idp.jwksUrl)} `))
  })

  it('when the provider serves a set with a well-formed encryption key next to its signing key (as Keycloak publishes one), then the set is installed', async () => {
    const idp = await provider([rsa])
    const { app, keySetLines } = await startJwtApp(idp)
    const encryptionKey = { ...ec.publicJwk, kid: 'enc-1', alg: 'ECDH-ES', use: 'enc' }
    idp.publish([ec, encryptionKey])
    await sleep(TIMINGS.refetchCooldownMs + 20)

    expect((await getPlants(app, await idp.sign(claimsFor(idp), { key: ec }))).statusCode).toBe(200)
    expectRefused(await getPlants(app, await idp.sign(claimsFor(idp), { key: rsa })))
    expect(keySetLines()).toEqual([])
  })
})
