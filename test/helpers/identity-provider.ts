import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { JWK } from 'jose'
import { signCompact, type TestHeader, type TestSigningKey } from './signing-keys.js'

export { generateSigningKey, type TestAlgorithm, type TestHeader, type TestSigningKey } from './signing-keys.js'

/** A claim set as the tests write it: JWT claims, or anything a verifier should refuse. */
export type Claims = Readonly<Record<string, unknown>>

/** What the key set serves: a test key's public half, or any raw JWK (a 1024-bit RSA key, an `oct` key, a private key…). */
export type PublishedKey = TestSigningKey | JWK

/** The two documents the provider serves. */
export type ProviderDocument = 'discovery' | 'jwks'

/**
 * How the provider answers: `serve` the document; `hang` (accept, read the request, never answer until
 * closed); `garbage` (200, JSON content type, an HTML body); `error500`; `reset` (the socket is reset
 * with RST); `huge` (200, the real document padded to 1.5 MiB, chunked, no Content-Length).
 */
export type ProviderBehaviour = 'serve' | 'hang' | 'garbage' | 'error500' | 'reset' | 'huge'

/** A real OpenID Connect provider's key publication on 127.0.0.1: discovery document and key set, nothing mocked in the service. */
export interface IdentityProvider {
  /** `http://127.0.0.1:<port><issuerPath>`, with a trailing `/` when asked (Auth0's issuers end in one). */
  readonly issuer: string
  /** `<issuer without its trailing />/.well-known/openid-configuration`. */
  readonly discoveryUrl: string
  readonly jwksUrl: string
  readonly port: number
  /** `Date.now()` of every request for each document, whatever the behaviour answered. */
  readonly fetches: { readonly discovery: readonly number[], readonly jwks: readonly number[] }
  /** Replaces the served key set (a rotation); the first test key in it becomes `sign`'s default. */
  publish (keys: readonly PublishedKey[]): void
  /** How requests are answered from now on, for both documents or only `options.document`; `delayMs` delays every answer. */
  behave (behaviour: ProviderBehaviour, options?: { readonly document?: ProviderDocument, readonly delayMs?: number }): void
  /**
   * Signs `claims` as a JWT, with the first published test key unless `options.key` names one. The header
   * is `{ alg, kid, typ: 'JWT' }` of that key, overridden by `options.header` (a `kid: undefined` drops it).
   */
  sign (claims: Claims, options?: { readonly key?: TestSigningKey, readonly header?: TestHeader }): Promise<string>
  /** Stops listening (connections are refused, open ones destroyed) until `restart`; what was published stays. */
  stop (): Promise<void>
  /** Listens again on the same port. */
  restart (): Promise<void>
  /** Destroys every connection, hung ones included, and stops listening. */
  close (): Promise<void>
}

export interface IdentityProviderOptions {
  readonly keys: readonly PublishedKey[]
  /** The issuer's path on the server: `/realms/plants` unless given; `''` for the origin itself. */
  readonly issuerPath?: string
  /** Whether the issuer ends in `/` (false unless given). */
  readonly trailingSlash?: boolean
  /** Where the key set is served: `<issuer path>/protocol/openid-connect/certs` (Keycloak's place) unless given. */
  readonly jwksPath?: string
  /** The `issuer` the discovery document names, when it must differ from the real one. */
  readonly discoveryIssuer?: string
}

const DISCOVERY_SUFFIX = '/.well-known/openid-configuration'
const HUGE_BYTES = 1536 * 1024
const GARBAGE = '<!DOCTYPE html><html><head><title>Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>'

/** Starts an identity provider on an ephemeral port of 127.0.0.1 serving `options.keys`; close it when the test ends. */
export async function startIdentityProvider (options: IdentityProviderOptions): Promise<IdentityProvider> {
  const issuerPath = (options.issuerPath ?? '/realms/plants').replace(/\/+$/, '')
  const discoveryPath = `${issuerPath}${DISCOVERY_SUFFIX}`
  const jwksPath = options.jwksPath ?? `${issuerPath}/protocol/openid-connect/certs`
  let published: readonly PublishedKey[] = [...options.keys]
  const behaviours: Record<ProviderDocument, { behaviour: ProviderBehaviour, delayMs: number }> = {
    discovery: { behaviour: 'serve', delayMs: 0 },
    jwks: { behaviour: 'serve', delayMs: 0 }
  }
  const fetches: Record<ProviderDocument, number[]> = { discovery: [], jwks: [] }
  const sockets = new Set<Socket>()
  const timers = new Set<NodeJS.Timeout>()
  let port = 0
  const origin = () => `http://127.0.0.1:${port}`
  const issuer = () => `${origin()}${issuerPath}${options.trailingSlash === true ? '/' : ''}`

  const documentOf = (document: ProviderDocument): object => document === 'jwks'
    ? { keys: published.map(servedJwk) }
    : discoveryDocument(options.discoveryIssuer ?? issuer(), `${origin()}${issuerPath}`, `${origin()}${jwksPath}`, published)

  const server = createServer((request, response) => {
    const document = documentAt(request, discoveryPath, jwksPath)
    if (document === undefined) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}')
      return
    }
    fetches[document].push(Date.now())
    const { behaviour, delayMs } = behaviours[document]
    if (behaviour === 'hang') return
    const timer = setTimeout(() => {
      timers.delete(timer)
      answer(request, response, behaviour, documentOf(document))
    }, delayMs)
    timers.add(timer)
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })

  const listen = (onPort: number) => new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(onPort, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const shut = async () => {
    for (const timer of timers) clearTimeout(timer)
    timers.clear()
    for (const socket of sockets) socket.destroy()
    if (server.listening) await new Promise<void>((resolve) => { server.close(() => { resolve() }) })
  }

  await listen(0)
  port = (server.address() as AddressInfo).port

  return {
    get issuer () { return issuer() },
    get discoveryUrl () { return `${origin()}${discoveryPath}` },
    get jwksUrl () { return `${origin()}${jwksPath}` },
    port,
    fetches,
    publish (keys) { published = [...keys] },
    behave (behaviour, { document, delayMs = 0 } = {}) {
      for (const each of document === undefined ? ['discovery', 'jwks'] as const : [document]) behaviours[each] = { behaviour, delayMs }
    },
    async sign (claims, { key = firstSigningKey(published), header = {} } = {}) {
      const fullHeader = { alg: key.alg, kid: key.kid, typ: 'JWT', ...header }
      return signCompact(new TextEncoder().encode(JSON.stringify(claims)), fullHeader, key)
    },
    stop: shut,
    restart: () => listen(port),
    close: shut
  }
}

function documentAt (request: IncomingMessage, discoveryPath: string, jwksPath: string): ProviderDocument | undefined {
  if (request.method !== 'GET') return undefined
  const path = new URL(request.url ?? '/', 'http://127.0.0.1').pathname
  if (path === discoveryPath) return 'discovery'
  if (path === jwksPath) return 'jwks'
  return undefined
}

function answer (request: IncomingMessage, response: ServerResponse, behaviour: Exclude<ProviderBehaviour, 'hang'>, document: object): void {
  const json = { 'content-type': 'application/json' }
  switch (behaviour) {
    case 'serve':
      response.writeHead(200, json).end(JSON.stringify(document))
      return
    case 'garbage':
      response.writeHead(200, json).end(GARBAGE)
      return
    case 'error500':
      response.writeHead(500, json).end('{"error":"server_error","error_description":"internal error"}')
      return
    case 'reset':
      request.socket.resetAndDestroy()
      return
    case 'huge': {
      // Valid JSON, so that only its size can be the reason to refuse it; written in parts, so chunked.
      const body = JSON.stringify({ ...document, padding: 'x'.repeat(HUGE_BYTES) })
      response.writeHead(200, json)
      for (let start = 0; start < body.length; start += 64 * 1024) response.write(body.slice(start, start + 64 * 1024))
      response.end()
    }
  }
}

function isSigningKey (key: PublishedKey): key is TestSigningKey {
  return 'publicJwk' in key && 'privateKey' in key
}

function servedJwk (key: PublishedKey): JWK {
  return isSigningKey(key) ? key.publicJwk : key
}

function firstSigningKey (keys: readonly PublishedKey[]): TestSigningKey {
  const key = keys.find(isSigningKey)
  if (key === undefined) throw new Error('no test signing key is published: pass options.key to sign')
  return key
}

function discoveryDocument (issuer: string, base: string, jwksUri: string, keys: readonly PublishedKey[]): object {
  const algorithms = [...new Set(keys.map((key) => servedJwk(key).alg).filter((alg) => alg !== undefined))]
  return {
    issuer,
    authorization_endpoint: `${base}/protocol/openid-connect/auth`,
    token_endpoint: `${base}/protocol/openid-connect/token`,
    userinfo_endpoint: `${base}/protocol/openid-connect/userinfo`,
    jwks_uri: jwksUri,
    response_types_supported: ['code', 'id_token', 'code id_token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: algorithms,
    grant_types_supported: ['authorization_code', 'client_credentials', 'refresh_token'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'private_key_jwt'],
    scopes_supported: ['openid', 'profile', 'email', 'plants:read', 'plants:write', 'admin'],
    claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'nbf', 'azp', 'scope', 'client_id']
  }
}
