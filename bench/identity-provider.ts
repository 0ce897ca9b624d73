import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose'

/** The algorithms the bench signs with: what providers issue (RS256 by default, PS256, ES256, EdDSA with Ed25519 keys). */
export const SIGNING_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'] as const
export type SigningAlgorithm = typeof SIGNING_ALGORITHMS[number]

/** The key each algorithm signs with, as the tables name it. */
export const KEY_OF: Readonly<Record<SigningAlgorithm, string>> = { RS256: 'RSA 2048', PS256: 'RSA 2048', ES256: 'P-256', EdDSA: 'Ed25519' }

/** The audience the bench's tokens carry and its services require. */
export const AUDIENCE = 'plantstore'
const REALM_PATH = '/realms/plants'
const KEY_SET_PATH = `${REALM_PATH}/protocol/openid-connect/certs`

/**
 * An identity provider for the bench, on 127.0.0.1 in the bench's process, shaped as Keycloak serves a
 * realm: an OpenID Connect discovery document under the issuer, and a key set (one key per algorithm,
 * each with its `kid` and `alg`) at the discovery document's `jwks_uri`. It signs access tokens with
 * Keycloak's claims.
 */
export class IdentityProvider {
  readonly #server: Server
  readonly #privateKeys: ReadonlyMap<SigningAlgorithm, CryptoKey>
  readonly issuer: string
  readonly jwksUrl: string

  private constructor (server: Server, privateKeys: ReadonlyMap<SigningAlgorithm, CryptoKey>) {
    this.#server = server
    this.#privateKeys = privateKeys
    const { port } = server.address() as AddressInfo
    this.issuer = `http://127.0.0.1:${port}${REALM_PATH}`
    this.jwksUrl = `http://127.0.0.1:${port}${KEY_SET_PATH}`
  }

  /** Generates a key pair per algorithm and serves the public keys. */
  static async start (): Promise<IdentityProvider> {
    const privateKeys = new Map<SigningAlgorithm, CryptoKey>()
    const publicKeys: JWK[] = []
    for (const algorithm of SIGNING_ALGORITHMS) {
      const { privateKey, publicKey } = await generateKeyPair(algorithm, { extractable: true, modulusLength: 2048 })
      privateKeys.set(algorithm, privateKey)
      publicKeys.push({ ...await exportJWK(publicKey), kid: keyIdOf(algorithm), alg: algorithm, use: 'sig' })
    }
    const keySet = JSON.stringify({ keys: publicKeys })
    let discovery = ''
    const server = createServer((request, response) => {
      const body = request.url === KEY_SET_PATH ? keySet : request.url === `${REALM_PATH}/.well-known/openid-configuration` ? discovery : undefined
      response.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(body ?? '{}')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const provider = new IdentityProvider(server, privateKeys)
    discovery = JSON.stringify({
      issuer: provider.issuer,
      jwks_uri: provider.jwksUrl,
      token_endpoint: `${provider.issuer}/protocol/openid-connect/token`,
      id_token_signing_alg_values_supported: [...SIGNING_ALGORITHMS]
    })
    return provider
  }

  /**
   * A client-credentials access token as Keycloak issues one (some 1,200 characters with RS256, 950 with ES256 or EdDSA), for
   * `plants:read plants:write`, expiring an hour ahead: each call a distinct token (its own `jti`).
   */
  async sign (algorithm: SigningAlgorithm): Promise<string> {
    const nowS = Math.floor(Date.now() / 1000)
    return new SignJWT({
      jti: randomUUID(),
      typ: 'Bearer',
      azp: 'plantstore-bench',
      acr: '1',
      realm_access: { roles: ['offline_access', 'default-roles-plants', 'uma_authorization'] },
      resource_access: { account: { roles: ['manage-account', 'view-profile'] } },
      scope: 'profile email plants:read plants:write',
      email_verified: false,
      preferred_username: 'service-account-plantstore-bench',
      client_id: 'plantstore-bench'
    })
      .setProtectedHeader({ alg: algorithm, typ: 'JWT', kid: keyIdOf(algorithm) })
      .setIssuer(this.issuer)
      .setAudience([AUDIENCE, 'account'])
      .setSubject(randomUUID())
      .setIssuedAt(nowS)
      .setExpirationTime(nowS + 3600)
      .sign(this.#privateKeys.get(algorithm) as CryptoKey)
  }

  close (): Promise<void> {
    return new Promise((resolve) => this.#server.close(() => { resolve() }))
  }
}

/** A key id shaped as Keycloak's (43 base64url characters), one per algorithm. */
const keyIdOf = (algorithm: SigningAlgorithm) => `bench-${algorithm.toLowerCase()}-`.padEnd(43, 'x')
