import type { Scope } from './scopes.js'

/**
 * The part of the storage port that keeps access tokens (docs/reference/api/tokens.md). Only SHA-256
 * digests are stored. Every change (a create, a revoke) also advances the store's token revision, which
 * instances poll to pick up changes that others made.
 */
export interface AccessTokenRecord {
  readonly id: string
  readonly name: string
  readonly scopes: readonly Scope[]
  readonly createdAt: Date
  readonly expiresAt?: Date
  readonly revokedAt?: Date
}

export interface VerifiableAccessToken extends AccessTokenRecord {
  /** SHA-256 of the token. */
  readonly digest: Buffer
}

export type CreateTokenOutcome = 'created' | 'name-taken'

export interface AccessTokenStore {
  /** Every stored token, live, expired and revoked, newest first. */
  list (): Promise<AccessTokenRecord[]>
  /** The tokens not revoked (expired ones included), with their digests: what authentication checks against. */
  listVerifiable (): Promise<VerifiableAccessToken[]>
  /** Changes whenever a token is created or revoked, by any process using this store. */
  revision (): Promise<string>
  /**
   * Stores the token unless a live token (neither revoked nor expired at `token.createdAt`) has its
   * name; the check and the insert are one transaction, so concurrent creates cannot both take a name.
   */
  create (token: VerifiableAccessToken): Promise<CreateTokenOutcome>
  /**
   * Revokes the token at `at` unless it is revoked already, and resolves with it as it is afterwards,
   * or undefined when no token has this id.
   */
  revoke (id: string, at: Date): Promise<AccessTokenRecord | undefined>
  /** Stores `token` only if no token was ever stored, and says whether it did: the first start's token. */
  createInitialAdmin (token: VerifiableAccessToken): Promise<boolean>
  /**
   * Calls `listener` soon after any process changes a token, where the backend can push that
   * (PostgreSQL `LISTEN`); returns the function that stops it. Polling `revision` covers the rest.
   */
  watch? (listener: () => void): () => void
}

/** Ordering of `list`: newest first. Ties keep their order (`Array.prototype.sort` is stable). */
export function newestFirst (a: AccessTokenRecord, b: AccessTokenRecord): number {
  return b.createdAt.getTime() - a.createdAt.getTime()
}

/** Whether a token is live at `at`: not revoked, and not expired. */
export function isLive (token: AccessTokenRecord, at: Date): boolean {
  return token.revokedAt === undefined && (token.expiresAt === undefined || token.expiresAt.getTime() > at.getTime())
}
