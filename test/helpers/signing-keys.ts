import type { webcrypto } from 'node:crypto'
import { base64url, CompactSign, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose'
import { recordIssuedToken } from './issued-tokens.js'

/** The signing algorithms a test key can be made for (every one plantstore may allow). */
export type TestAlgorithm = 'RS256' | 'RS384' | 'RS512' | 'PS256' | 'PS384' | 'PS512' | 'ES256' | 'ES384' | 'ES512' | 'EdDSA' | 'Ed25519'

/** A key pair of the test identity provider: the private half signs, the public half is served in its key set. */
export interface TestSigningKey {
  readonly kid: string
  /** The `alg` its tokens' headers and its served JWK carry (`EdDSA` and `Ed25519` are both Ed25519 keys). */
  readonly alg: TestAlgorithm
  readonly privateKey: CryptoKey
  readonly publicKey: CryptoKey
  /** The public key as the key set serves it: its key parameters, `kid`, `alg` and `use: 'sig'`. */
  readonly publicJwk: JWK
}

/** A JWS protected header as the tests write it: `alg` plus anything, even what a verifier should refuse. */
export type TestHeader = Readonly<Record<string, unknown>>

const MIN_RSA_BITS = 2048

/**
 * Generates a key pair for `alg` (RSA 2048 bits unless `modulusLength` says otherwise; ES256 on P-256,
 * ES384 on P-384, ES512 on P-521; EdDSA and Ed25519 on Ed25519). jose refuses RSA keys under 2048 bits,
 * so a shorter one (to prove the service refuses it) is made and used with Web Crypto directly.
 */
export async function generateSigningKey (alg: TestAlgorithm, kid: string, options: { readonly modulusLength?: number } = {}): Promise<TestSigningKey> {
  const modulusLength = options.modulusLength ?? MIN_RSA_BITS
  const { privateKey, publicKey } = isRsa(alg) && modulusLength < MIN_RSA_BITS
    ? await generateShortRsaKeyPair(alg, modulusLength)
    : await generateKeyPair(alg, { modulusLength })
  const { kty, n, e, crv, x, y } = await exportJWK(publicKey)
  const parameters = Object.fromEntries(Object.entries({ kty, n, e, crv, x, y }).filter(([, value]) => value !== undefined))
  return { kid, alg, privateKey, publicKey, publicJwk: { ...parameters, kid, alg, use: 'sig' } }
}

/**
 * Signs `payload` (any bytes) as a JWS in compact form with `header` as its protected header, as is:
 * names listed in `crit` are declared understood so that the header is signed, not refused.
 */
export async function signCompact (payload: Uint8Array, header: TestHeader, key: TestSigningKey): Promise<string> {
  if (usesShortRsaKey(key)) return recordIssuedToken(await signWithWebCrypto(payload, header, key))
  const crit = Array.isArray(header.crit) ? header.crit.filter((name) => typeof name === 'string') : []
  return recordIssuedToken(await new CompactSign(payload)
    .setProtectedHeader({ ...header, alg: String(header.alg) })
    .sign(key.privateKey, { crit: Object.fromEntries(crit.map((name) => [name, true])) }))
}

/** The base64url form of a JSON value, as a JWS segment. */
export function jsonSegment (value: unknown): string {
  return base64url.encode(JSON.stringify(value))
}

function isRsa (alg: TestAlgorithm): boolean {
  return alg.startsWith('RS') || alg.startsWith('PS')
}

function hashOf (alg: TestAlgorithm): string {
  return `SHA-${alg.slice(2)}`
}

async function generateShortRsaKeyPair (alg: TestAlgorithm, modulusLength: number): Promise<{ readonly privateKey: CryptoKey, readonly publicKey: CryptoKey }> {
  const name = alg.startsWith('PS') ? 'RSA-PSS' : 'RSASSA-PKCS1-v1_5'
  return crypto.subtle.generateKey({ name, modulusLength, publicExponent: Uint8Array.of(1, 0, 1), hash: hashOf(alg) }, true, ['sign', 'verify'])
}

function usesShortRsaKey (key: TestSigningKey): boolean {
  const { modulusLength } = key.privateKey.algorithm as Partial<webcrypto.RsaHashedKeyAlgorithm>
  return modulusLength !== undefined && modulusLength < MIN_RSA_BITS
}

async function signWithWebCrypto (payload: Uint8Array, header: TestHeader, key: TestSigningKey): Promise<string> {
  const signingInput = `${jsonSegment(header)}.${base64url.encode(payload)}`
  const parameters = key.alg.startsWith('PS')
    ? { name: 'RSA-PSS', saltLength: Number(key.alg.slice(2)) / 8 }
    : { name: 'RSASSA-PKCS1-v1_5' }
  const signature = await crypto.subtle.sign(parameters, key.privateKey, new TextEncoder().encode(signingInput))
  return `${signingInput}.${base64url.encode(new Uint8Array(signature))}`
}
