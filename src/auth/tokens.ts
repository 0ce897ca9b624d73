import { hash, randomBytes } from 'node:crypto'
import { isScope, PLANT_SCOPES } from './scope-sets.js'
import type { Scope } from '../store/scopes.js'

/** RFC 6750 §2.1 `b64token`: the only token syntax a Bearer credential may have. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/
const DIGEST_ENTRY = /^sha256:([0-9a-fA-F]{64})$/
/** docs/reference/api/tokens.md: 1–64 characters of `[A-Za-z0-9._-]`. */
export const TOKEN_NAME = /^[A-Za-z0-9._-]{1,64}$/
/** The rule a bad name breaks, as the end of a sentence that starts with what holds the name. */
export const TOKEN_NAME_RULE = 'must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"'
/** What every generated token looks like: secret scanners recognise the prefix. */
export const GENERATED_TOKEN = /^pst_[A-Za-z0-9_-]{43}$/

export function isB64Token (token: string): boolean {
  return B64TOKEN.test(token)
}

export function digestToken (token: string): Buffer {
  // The one-shot form: about half the cost of createHash().update().digest().
  return hash('sha256', token, 'buffer')
}

/** A fresh token: `pst_` and 256 random bits in base64url (43 characters), valid b64token syntax. */
export function generateToken (): string {
  return `pst_${randomBytes(32).toString('base64url')}`
}

/** A token of `PLANTSTORE_TOKENS`, as the service keeps it: never the token itself. */
export interface ConfiguredToken {
  readonly name: string
  readonly scopes: readonly Scope[]
  readonly digest: Buffer
}

/**
 * Parses `PLANTSTORE_TOKENS`: comma-separated entries, each a token or `sha256:<64 hex>` (the digest
 * of one), optionally preceded by `name=<name>;` and `scopes=<scope>+<scope>;`. An entry without a
 * name is `environment-<n>`, n its 1-based position; without scopes it carries `plants:read` and
 * `plants:write`. Error messages name the entry by position, never its text.
 */
export function parseTokenList (text: string): ConfiguredToken[] {
  const entries = text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
  if (entries.length === 0) throw new Error('holds no token; leave it unset to use a generated token')
  const tokens = entries.map((entry, index) => parseEntry(entry, index + 1))
  const names = new Set<string>()
  tokens.forEach((token, index) => {
    if (names.has(token.name)) throw new Error(`entry ${index + 1} repeats the name "${token.name}"; names must be unique`)
    names.add(token.name)
  })
  return tokens
}

function parseEntry (entry: string, position: number): ConfiguredToken {
  const parts = entry.split(';').map((part) => part.trim())
  const secret = parts.pop() as string
  let name: string | undefined
  let scopes: Scope[] | undefined
  for (const part of parts) {
    const [key, value = ''] = part.split(/=(.*)/s)
    if (key === 'name' && name === undefined) {
      if (!TOKEN_NAME.test(value)) throw new Error(`entry ${position} has a bad name: it ${TOKEN_NAME_RULE}`)
      name = value
    } else if (key === 'scopes' && scopes === undefined) {
      scopes = parseScopes(value, position)
    } else {
      // Whatever else stands here may be the token itself, written in the wrong place: never echoed.
      throw new Error(`entry ${position}: only one "name=…;" and one "scopes=…;" may come before the token, and the token comes last`)
    }
  }
  return { name: name ?? `environment-${position}`, scopes: scopes ?? PLANT_SCOPES, digest: parseSecret(secret, position) }
}

function parseScopes (text: string, position: number): Scope[] {
  const scopes = text.split('+').map((scope) => scope.trim())
  const unknown = scopes.find((scope) => !isScope(scope))
  if (unknown !== undefined) {
    throw new Error(`entry ${position} has the unknown scope ${JSON.stringify(unknown)}; scopes are plants:read, plants:write and admin, joined by "+"`)
  }
  return scopes as Scope[]
}

function parseSecret (secret: string, position: number): Buffer {
  const digestHex = DIGEST_ENTRY.exec(secret)?.[1]
  if (digestHex !== undefined) return Buffer.from(digestHex, 'hex')
  if (secret.startsWith('sha256:')) throw new Error(`entry ${position} must be "sha256:" followed by 64 hexadecimal digits`)
  if (!isB64Token(secret)) {
    throw new Error(`entry ${position} is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)`)
  }
  return digestToken(secret)
}
