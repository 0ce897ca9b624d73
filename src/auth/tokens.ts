import { hash, randomBytes, timingSafeEqual } from 'node:crypto'

/** RFC 6750 §2.1 `b64token`: the only token syntax a Bearer credential may have. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/
const DIGEST_ENTRY = /^sha256:([0-9a-fA-F]{64})$/

export function isB64Token (token: string): boolean {
  return B64TOKEN.test(token)
}

export function digestToken (token: string): Buffer {
  // The one-shot form: about half the cost of createHash().update().digest(), and it runs per request.
  return hash('sha256', token, 'buffer')
}

/** A fresh random token: 32 bytes of entropy in base64url, which is valid b64token syntax. */
export function generateToken (): string {
  return randomBytes(32).toString('base64url')
}

/**
 * Parses `PLANTSTORE_TOKENS`: comma-separated entries, each a plain token or `sha256:<64 hex>`, the
 * digest of one. Only digests are kept. Error messages name the entry by position, never its text.
 */
export function parseTokenList (text: string): Buffer[] {
  const digests: Buffer[] = []
  text.split(',').forEach((rawEntry, index) => {
    const entry = rawEntry.trim()
    if (entry === '') return
    const digestHex = DIGEST_ENTRY.exec(entry)?.[1]
    if (digestHex !== undefined) {
      digests.push(Buffer.from(digestHex, 'hex'))
    } else if (entry.startsWith('sha256:')) {
      throw new Error(`entry ${index + 1} must be "sha256:" followed by 64 hexadecimal digits`)
    } else if (!isB64Token(entry)) {
      throw new Error(`entry ${index + 1} is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)`)
    } else {
      digests.push(digestToken(entry))
    }
  })
  if (digests.length === 0) throw new Error('holds no token; leave it unset to use a generated token')
  return digests
}

/**
 * The set of accepted tokens, held as SHA-256 digests. A presented token is digested and compared
 * with every accepted digest by `timingSafeEqual`, without stopping at a match, so the time taken does
 * not depend on how much of any token is right, nor on which one matched.
 *
 * A token that passed is remembered, so the clients' next requests skip the digest (the costliest step
 * of authentication). Only accepted tokens enter, so the memo holds at most one entry per accepted
 * digest. A wrong token never matches it: a `Map` compares the contents of two strings only when their
 * hashes, seeded at random per process, are equal, so a wrong guess learns nothing from its timing.
 */
export class AccessTokens {
  private readonly digests: readonly Buffer[]
  /** Accepted tokens, each with the position of its digest. */
  private readonly verified = new Map<string, number>()

  constructor (digests: readonly Buffer[]) {
    if (digests.length === 0) throw new Error('at least one access token is needed')
    this.digests = digests.map((digest) => Buffer.from(digest))
  }

  accepts (token: string): boolean {
    return this.identify(token) !== undefined
  }

  /**
   * Which accepted token this is, as the position of its digest (a name for it that is neither the
   * token nor its digest), or undefined when it is not accepted.
   */
  identify (token: string): number | undefined {
    const known = this.verified.get(token)
    if (known !== undefined) return known
    const presented = digestToken(token)
    let match: number | undefined
    this.digests.forEach((digest, index) => {
      if (timingSafeEqual(digest, presented) && match === undefined) match = index
    })
    if (match !== undefined && this.verified.size < this.digests.length) this.verified.set(token, match)
    return match
  }
}

export interface ResolvedAccessTokens {
  readonly accessTokens: AccessTokens
  /** The token this start generated and stored, to be shown once; absent otherwise. */
  readonly generatedToken?: string
}

/**
 * The configured tokens when there are any. Otherwise the generated token: the first start makes one
 * and stores only its digest; later starts (and other instances on the same database) accept it.
 */
export async function resolveAccessTokens (
  configured: readonly Buffer[],
  store: { ensureGeneratedTokenDigest (digest: Buffer): Promise<Buffer> }
): Promise<ResolvedAccessTokens> {
  if (configured.length > 0) return { accessTokens: new AccessTokens(configured) }
  const candidate = generateToken()
  const candidateDigest = digestToken(candidate)
  const storedDigest = await store.ensureGeneratedTokenDigest(candidateDigest)
  const accessTokens = new AccessTokens([storedDigest])
  return storedDigest.equals(candidateDigest) ? { accessTokens, generatedToken: candidate } : { accessTokens }
}
