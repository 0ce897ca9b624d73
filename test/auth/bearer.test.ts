import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { digestToken, parseTokenList } from '../../src/auth/tokens.js'
import { buildTestApp, expectError, expectNothingStored, memoryBackend, postPlant, sharedTestApp, TEST_TOKEN } from '../helpers/app.js'

const CHALLENGE = 'Bearer realm="plantstore"'
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'
const NO_CREDENTIALS = 'this operation needs an "Authorization: Bearer <token>" header'
const BAD_TOKEN = 'the bearer token is missing, malformed or not accepted'

describe('Authentication of /plants', () => {
  // One app for the refused requests: each proves that it stored nothing, and leaves nothing stored.
  const shared = sharedTestApp(memoryBackend)

  describe('when no Bearer credential is sent at all', () => {
    it.each([
      ['no Authorization header', {}],
      ['the Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
      ['a scheme that merely starts with Bearer', { authorization: `Bearerx ${TEST_TOKEN}` }],
      ['an empty Authorization header', { authorization: '' }]
    ])('then %s is a 401 with a challenge and no error code', async (_case, headers) => {
      const app = shared()

      // Sent as given: the helper's default token must not stand in for "no header at all".
      const response = await app.inject({
        method: 'POST', url: '/plants', headers: { 'content-type': 'application/json', ...headers }, payload: '{"id":1,"name":"Fern"}'
      })

      expectError(response, 401, NO_CREDENTIALS)
      expect(response.headers['www-authenticate']).toBe(CHALLENGE)
      await expectNothingStored(app, '1')
    })
  })

  describe('when the Bearer credential is missing, malformed or unknown', () => {
    it.each([
      ['no token', 'Bearer'],
      ['only spaces after the scheme', 'Bearer    '],
      ['an unknown token', 'Bearer not-the-right-token'],
      ['the right token with a character more', `Bearer ${TEST_TOKEN}x`]
    ])('then %s is a 401 with error="invalid_token"', async (_case, authorization) => {
      const app = shared()

      const response = await postPlant(app, { id: 2, name: 'Fern' }, { authorization })

      expectError(response, 401, BAD_TOKEN)
      expect(response.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
      await expectNothingStored(app, '2')
    })
  })

  describe('when the credential is not b64token syntax, even though its digest is configured', () => {
    it.each([
      ['two credentials', 'two tokens'],
      ['characters outside b64token', 'tök€n'],
      ['padding in the middle', 'ab=cd'],
      ['a comma-joined second credential', 'abc, Basic xyz']
    ])('then %s is a 401 with error="invalid_token"', async (_case, token) => {
      const app = await buildTestApp({ tokens: [`sha256:${digestToken(token).toString('hex')}`, TEST_TOKEN] })

      const response = await postPlant(app, { id: 2, name: 'Fern' }, { authorization: `Bearer ${token}` })

      expectError(response, 401, BAD_TOKEN)
      expect(response.headers['www-authenticate']).toBe(INVALID_TOKEN_CHALLENGE)
      await expectNothingStored(app, '2')
    })
  })

  describe('when the token is accepted', () => {
    it.each([
      ['the canonical form', `Bearer ${TEST_TOKEN}`],
      ['a lower-case scheme', `bearer ${TEST_TOKEN}`],
      ['an upper-case scheme', `BEARER ${TEST_TOKEN}`],
      ['extra spaces around the token', `Bearer    ${TEST_TOKEN}   `]
    ])('then %s passes', async (_case, authorization) => {
      const app = await buildTestApp()

      const response = await postPlant(app, { id: 3, name: 'Fern' }, { authorization })

      expect(response.statusCode).toBe(200)
      expect(response.headers['www-authenticate']).toBeUndefined()
    })

    it.each([
      ['a tilde', 'ops~token'],
      ['+ and / as standard base64 writes them', 'b3Bz+dG9r/ZW4'],
      ['trailing = padding', 'b3BzLXRva2Vu=='],
      ['every b64token character', 'Az09-._~+/x==']
    ])('then an operator\'s token with %s is accepted, configured as its digest or as the token', async (_case, token) => {
      for (const entry of [`sha256:${digestToken(token).toString('hex')}`, token]) {
        const app = await buildTestApp({ tokens: [entry] })

        const response = await postPlant(app, { id: 3, name: 'Fern' }, { authorization: `Bearer ${token}` })

        expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 200, body: { name: 'Fern' } })
        expect(response.headers['www-authenticate']).toBeUndefined()
      }
    })

    it('then every configured token is accepted, and only those', async () => {
      const app = await buildTestApp({ tokens: ['first-token', 'second-token'] })

      const first = await postPlant(app, { id: 4, name: 'a' }, { authorization: 'Bearer first-token' })
      const second = await postPlant(app, { id: 5, name: 'b' }, { authorization: 'Bearer second-token' })
      const testToken = await postPlant(app, { id: 6, name: 'c' })

      expect([first.statusCode, second.statusCode, testToken.statusCode]).toEqual([200, 200, 401])
    })
  })

  describe('when the request is unauthenticated and otherwise broken too', () => {
    it.each([
      ['invalid JSON', { 'content-type': 'application/json' }, '{"id":'],
      ['a body over the limit', { 'content-type': 'application/json' }, `{"id":1,"name":"${'x'.repeat(20_000)}"}`],
      ['a foreign media type', { 'content-type': 'text/plain' }, 'hello'],
      ['a content encoding', { 'content-type': 'application/json', 'content-encoding': 'gzip' }, '{}'],
      ['an invalid field', { 'content-type': 'application/json' }, '{"id":"x"}']
    ])('then authentication comes first: %s gets a 401', async (_case, headers, payload) => {
      const app = shared()

      const response = await app.inject({ method: 'POST', url: '/plants', headers, payload })

      expectError(response, 401, NO_CREDENTIALS)
      expect(response.headers['www-authenticate']).toBe(CHALLENGE)
    })

    it('then an unsupported method on /plants gets a 401, not a 405', async () => {
      const app = shared()

      const response = await app.inject({ method: 'PUT', url: '/plants' })

      expectError(response, 401, NO_CREDENTIALS)
    })
  })

  it('never writes the token into the logs, even at trace level', async () => {
    const lines: string[] = []
    const logStream = new Writable({
      write (chunk: Buffer, _encoding, callback) {
        lines.push(...chunk.toString().split('\n').filter((line) => line !== ''))
        callback()
      }
    })
    const app = await buildTestApp({ config: { logLevel: 'trace' }, logStream })

    await postPlant(app, { id: 7, name: 'Fern' })
    await postPlant(app, { id: 8, name: 'Fern' }, { authorization: `Bearer ${TEST_TOKEN}wrong` })
    await postPlant(app, '{"id":', { authorization: `Basic ${TEST_TOKEN}` })
    // Completed-request lines are written at the end of the event-loop turn.
    await new Promise(setImmediate)

    expect(lines.filter((line) => line.includes('"msg":"request completed"'))).toHaveLength(3)
    expect(lines.length).toBeGreaterThan(3)
    expect(lines.join('\n')).not.toContain(TEST_TOKEN)
    expect(lines.join('\n')).not.toContain('"headers"')
  })

  it('redacts the Authorization header should anything log request headers', async () => {
    const lines: string[] = []
    const logStream = new Writable({
      write (chunk: Buffer, _encoding, callback) {
        lines.push(chunk.toString())
        callback()
      }
    })
    const app = await buildTestApp({ logStream, config: { logLevel: 'info' } })

    app.log.info({ headers: { authorization: `Bearer ${TEST_TOKEN}` } }, 'a careless plugin')

    expect(lines.join('\n')).toContain('"authorization":"[redacted]"')
    expect(lines.join('\n')).not.toContain(TEST_TOKEN)
  })
})

describe('PLANTSTORE_TOKENS', () => {
  it('accepts plain tokens and sha256: digests, keeping only digests, named by position with the plant scopes', () => {
    const digestHex = digestToken('from-a-digest').toString('hex')

    const tokens = parseTokenList(` plain-token , sha256:${digestHex.toUpperCase()} ,`)

    expect(tokens).toEqual([
      { name: 'environment-1', scopes: ['plants:read', 'plants:write'], digest: digestToken('plain-token') },
      { name: 'environment-2', scopes: ['plants:read', 'plants:write'], digest: Buffer.from(digestHex, 'hex') }
    ])
  })

  it('takes a name and scopes before the token, in either order', () => {
    const digestHex = digestToken('ci-token-value').toString('hex')

    const tokens = parseTokenList(`name=ci;scopes=plants:read+plants:write;sha256:${digestHex}, scopes=admin ; name=ops.team_1 ; ops-token-value,scopes=plants:read;reader`)

    expect(tokens).toEqual([
      { name: 'ci', scopes: ['plants:read', 'plants:write'], digest: digestToken('ci-token-value') },
      { name: 'ops.team_1', scopes: ['admin'], digest: digestToken('ops-token-value') },
      { name: 'environment-3', scopes: ['plants:read'], digest: digestToken('reader') }
    ])
  })

  it.each([
    ['a short digest', 'sha256:abc', 'entry 1 must be "sha256:" followed by 64 hexadecimal digits'],
    ['a token with spaces', 'good,has space', 'entry 2 is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)'],
    ['only commas', ' , ,', 'holds no token; leave it unset to use a generated token'],
    ['an unknown scope', 'scopes=plants:read+plants:delete;abc', 'entry 1 has the unknown scope "plants:delete"; scopes are plants:read, plants:write and admin, joined by "+"'],
    ['an empty scope list', 'scopes=;abc', 'entry 1 has the unknown scope ""; scopes are plants:read, plants:write and admin, joined by "+"'],
    ['a bad name', 'name=has space;abc', 'entry 1 has a bad name: it must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"'],
    ['a name too long', `name=${'n'.repeat(65)};abc`, 'entry 1 has a bad name: it must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"'],
    ['an unknown attribute', 'owner=me;abc', 'entry 1: only one "name=…;" and one "scopes=…;" may come before the token, and the token comes last'],
    ['the token before the attributes', 'abc-token-value;name=ci', 'entry 1: only one "name=…;" and one "scopes=…;" may come before the token, and the token comes last'],
    ['the token between the attributes', 'name=ci;abc-token-value;scopes=admin', 'entry 1: only one "name=…;" and one "scopes=…;" may come before the token, and the token comes last'],
    ['a repeated name', 'name=ci;abc,name=ci;def', 'entry 2 repeats the name "ci"; names must be unique'],
    ['a name that repeats a default name', 'abc,name=environment-1;def', 'entry 2 repeats the name "environment-1"; names must be unique']
  ])('refuses %s without echoing the token', (_case, text, message) => {
    expect(() => parseTokenList(text)).toThrow(message)
    expect(() => parseTokenList(text)).not.toThrow(/abc/)
  })
})
