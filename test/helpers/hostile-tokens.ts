import { base64url, CompactEncrypt, CompactSign, exportSPKI, generateKeyPair } from 'jose'
import type { Claims } from './identity-provider.js'
import { recordIssuedToken } from './issued-tokens.js'
import { jsonSegment, signCompact, type TestSigningKey } from './signing-keys.js'

/** The forms of a public key an attacker tries as an HMAC secret. */
export type PublicKeySecretForm = 'spki-pem' | 'jwk-json'

/** `alg: none`: the claims with an empty signature (`<header>.<payload>.`). */
export function unsignedToken (claims: Claims): string {
  return recordIssuedToken(`${jsonSegment({ alg: 'none', typ: 'JWT' })}.${jsonSegment(claims)}.`)
}

/**
 * Algorithm confusion: an `HS256` token, with `key`'s `kid`, whose HMAC secret is `key`'s public key as
 * anyone can get it: its SPKI PEM (`spki-pem`) or the served JWK's JSON text (`jwk-json`).
 */
export async function hmacWithPublicKey (claims: Claims, key: TestSigningKey, form: PublicKeySecretForm): Promise<string> {
  const secret = form === 'spki-pem' ? await exportSPKI(key.publicKey) : JSON.stringify(key.publicJwk)
  return recordIssuedToken(await new CompactSign(encodeJson(claims))
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: key.kid })
    .sign(new TextEncoder().encode(secret)))
}

/**
 * A properly signed token whose header marks an extension critical that no verifier knows:
 * `crit: [extension]` with that parameter present (RFC 7515 4.1.11 says: refuse it).
 */
export async function withCritHeader (claims: Claims, key: TestSigningKey, extension = 'exp-ext'): Promise<string> {
  return signCompact(encodeJson(claims), { alg: key.alg, kid: key.kid, typ: 'JWT', crit: [extension], [extension]: Math.floor(Date.now() / 1000) + 3600 }, key)
}

/** A properly signed JWS whose payload is not JSON (by default the text `plants:read plants:write`). */
export async function nonJsonPayload (key: TestSigningKey, payload = 'plants:read plants:write'): Promise<string> {
  return signCompact(new TextEncoder().encode(payload), { alg: key.alg, kid: key.kid, typ: 'JWT' }, key)
}

/**
 * A real JWE in compact form (five segments) carrying `claims`: ECDH-ES+A256KW with A256GCM, to a
 * key nobody else has. What a provider issues when the API is set to encrypted tokens.
 */
export async function jweShaped (claims: Claims = {}): Promise<string> {
  const { publicKey } = await generateKeyPair('ECDH-ES+A256KW', { crv: 'P-256' })
  return recordIssuedToken(await new CompactEncrypt(encodeJson(claims))
    .setProtectedHeader({ alg: 'ECDH-ES+A256KW', enc: 'A256GCM', typ: 'JWT', cty: 'JWT' })
    .encrypt(publicKey))
}

/**
 * A properly signed, otherwise valid token padded with a `padding` claim until it is `length`
 * characters long (16 KiB unless given), give or take the 3 characters base64url rounding leaves.
 */
export async function oversized (claims: Claims, key: TestSigningKey, length = 16 * 1024): Promise<string> {
  const sign = (padding: number) => signCompact(encodeJson({ ...claims, padding: 'p'.repeat(padding) }), { alg: key.alg, kid: key.kid, typ: 'JWT' }, key)
  const bare = await sign(0)
  // Each padding character costs 4/3 of a base64url character; signatures keep their length.
  return sign(Math.max(0, Math.round((length - bare.length) * 3 / 4)))
}

/** `token` with one character of its signature changed: a signature that does not verify. */
export function withForgedSignature (token: string): string {
  const dot = token.lastIndexOf('.')
  const signature = base64url.decode(token.slice(dot + 1))
  signature[0] = (signature[0] ?? 0) ^ 0x01
  return recordIssuedToken(`${token.slice(0, dot + 1)}${base64url.encode(signature)}`)
}

function encodeJson (value: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(value))
}
