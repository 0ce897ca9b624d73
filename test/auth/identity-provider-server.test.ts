import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { generateSigningKey, startIdentityProvider, type IdentityProvider, type TestSigningKey } from '../helpers/identity-provider.js'
import { claimsFor, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'

// The JWT tests' identity provider is itself checked here, over real HTTP, the way the service reads it.

let rsa: TestSigningKey
let ec: TestSigningKey
let ed: TestSigningKey
const providers: IdentityProvider[] = []

beforeAll(async () => {
  [rsa, ec, ed] = await Promise.all([generateSigningKey('RS256', 'rsa-1'), generateSigningKey('ES256', 'ec-1'), generateSigningKey('EdDSA', 'ed-1')])
})

afterEach(async () => {
  await Promise.all(providers.splice(0).map((provider) => provider.close()))
})

async function provider (options: Partial<Parameters<typeof startIdentityProvider>[0]> = {}): Promise<IdentityProvider> {
  const started = await startIdentityProvider({ keys: [rsa, ec, ed], ...options })
  providers.push(started)
  return started
}

async function keySetOf (idp: IdentityProvider): Promise<JSONWebKeySet> {
  const discovery = await (await fetch(idp.discoveryUrl)).json() as { issuer: string, jwks_uri: string }
  expect(discovery.issuer).toBe(idp.issuer)
  return await (await fetch(discovery.jwks_uri)).json() as JSONWebKeySet
}

describe('The test identity provider', () => {
  it('when a client follows discovery to the key set, then every published key verifies the tokens it signs', async () => {
    const idp = await provider()
    const keySet = await keySetOf(idp)

    expect(keySet.keys.map(({ kid, alg, use }) => ({ kid, alg, use }))).toEqual([
      { kid: 'rsa-1', alg: 'RS256', use: 'sig' }, { kid: 'ec-1', alg: 'ES256', use: 'sig' }, { kid: 'ed-1', alg: 'EdDSA', use: 'sig' }
    ])
    expect(keySet.keys.some((key) => 'd' in key)).toBe(false)
    for (const key of [rsa, ec, ed]) {
      const token = await idp.sign(claimsFor(idp), { key })
      const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(keySet), { issuer: idp.issuer, audience: TEST_AUDIENCE })
      expect(protectedHeader).toEqual({ alg: key.alg, kid: key.kid, typ: 'JWT' })
      expect(payload.scope).toBe('plants:read plants:write')
    }
  })

  it('when it has an Auth0-style issuer, then the issuer ends in a slash and discovery is found without it', async () => {
    const idp = await provider({ issuerPath: '', trailingSlash: true, jwksPath: '/.well-known/jwks.json' })

    expect(idp.issuer).toBe(`http://127.0.0.1:${idp.port}/`)
    expect(idp.discoveryUrl).toBe(`http://127.0.0.1:${idp.port}/.well-known/openid-configuration`)
    expect((await keySetOf(idp)).keys).toHaveLength(3)
  })

  it('when keys are published anew, then the key set serves only them and sign uses the first', async () => {
    const idp = await provider()
    const rotated = await generateSigningKey('ES256', 'ec-2')

    idp.publish([rotated, { kty: 'oct', k: 'c2VjcmV0', kid: 'shared', alg: 'HS256' }])

    expect((await keySetOf(idp)).keys.map((key) => key.kid)).toEqual(['ec-2', 'shared'])
    expect(decodeProtectedHeader(await idp.sign(claimsFor(idp))).kid).toBe('ec-2')
  })

  it('when told to hang, then a fetch with a 300 ms time-out gives up, and close ends the hung request', async () => {
    const idp = await provider()
    idp.behave('hang', { document: 'jwks' })

    await expect(fetch(idp.jwksUrl, { signal: AbortSignal.timeout(300) })).rejects.toThrow(/abort/i)
    expect((await fetch(idp.discoveryUrl)).status).toBe(200)
    const pending = fetch(idp.jwksUrl)
    await idp.close()
    await expect(pending).rejects.toThrow()
  })

  it.each([
    ['error500', 500, '{"error":"server_error","error_description":"internal error"}'],
    ['garbage', 200, '<!DOCTYPE html>']
  ] as const)('when told to answer %s, then both documents get status %i', async (behaviour, status, bodyStart) => {
    const idp = await provider()
    idp.behave(behaviour)

    for (const url of [idp.discoveryUrl, idp.jwksUrl]) {
      const response = await fetch(url)
      expect(response.status).toBe(status)
      expect((await response.text()).startsWith(bodyStart)).toBe(true)
    }
  })

  it('when told to reset, then the fetch fails', async () => {
    const idp = await provider()
    idp.behave('reset')

    await expect(fetch(idp.jwksUrl)).rejects.toThrow('fetch failed')
  })

  it('when told to be huge, then the key set is valid JSON over 1 MiB, sent without a length', async () => {
    const idp = await provider()
    idp.behave('huge', { document: 'jwks' })

    const response = await fetch(idp.jwksUrl)
    const body = await response.text()
    expect(response.headers.get('content-length')).toBeNull()
    expect(body.length).toBeGreaterThan(1024 * 1024)
    expect((JSON.parse(body) as JSONWebKeySet).keys).toHaveLength(3)
  })

  it('when documents are fetched, then each request is counted with its time, whatever the answer', async () => {
    const idp = await provider()
    const before = Date.now()

    await fetch(idp.discoveryUrl)
    idp.behave('error500')
    await fetch(idp.jwksUrl)
    await fetch(idp.jwksUrl)
    await fetch(`http://127.0.0.1:${idp.port}/elsewhere`)

    expect(idp.fetches.discovery).toHaveLength(1)
    expect(idp.fetches.jwks).toHaveLength(2)
    expect([...idp.fetches.discovery, ...idp.fetches.jwks].every((at) => at >= before && at <= Date.now())).toBe(true)
  })

  it('when it names another issuer in discovery, then the document says so', async () => {
    const idp = await provider({ discoveryIssuer: 'https://elsewhere.example/realms/plants' })

    const discovery = await (await fetch(idp.discoveryUrl)).json() as { issuer: string }
    expect(discovery.issuer).toBe('https://elsewhere.example/realms/plants')
  })

  it('when stopped, then connections are refused until it restarts on the same port', async () => {
    const idp = await provider()

    await idp.stop()
    await expect(fetch(idp.jwksUrl)).rejects.toThrow('fetch failed')
    await idp.restart()
    expect((await fetch(idp.jwksUrl)).status).toBe(200)
  })
})
