import { createHash, randomUUID, timingSafeEqual } from 'node:crypto'
import {
  isLive, newestFirst, type AccessTokenRecord, type AccessTokenStore, type VerifiableAccessToken
} from '../store/access-token-store.js'
import { grants, scopeSetOf, type ScopeSet } from './scope-sets.js'
import { canonicalScopes, SCOPES, type Scope } from '../store/scopes.js'
import { digestToken, generateToken, type ConfiguredToken } from './tokens.js'

/** Who a request's token is: what the log line, the rate limit and the scope check need, never the token. */
export interface TokenIdentity {
  readonly id: string
  readonly name: string
  readonly scopes: ScopeSet
  /** When the token stops being accepted, in milliseconds since the epoch; Infinity for never. */
  readonly expiresAtMs: number
  /**
   * Which secret a service token is (absent for a JWT's identity), so that an entry of the token file
   * replaced under the same name (or position) is another token: the SHA-256 of its digest, which tells
   * nothing of the digest itself should it ever be shown.
   */
  readonly secretFingerprint?: string
}

export type TokenSource = 'store' | 'environment'

/** A token as `GET /admin/tokens` and `plantstore tokens list` show it: no token, no digest. */
export interface TokenView extends AccessTokenRecord {
  readonly source: TokenSource
}

export type CreateTokenResult =
  | { readonly status: 'created', readonly token: AccessTokenRecord, readonly secret: string }
  | { readonly status: 'name-taken' }

export type RevokeTokenResult =
  | { readonly status: 'revoked', readonly token: AccessTokenRecord }
  | { readonly status: 'not-found' }
  | { readonly status: 'environment', readonly token: TokenView }

/** The id of a `PLANTSTORE_TOKENS` entry: stable across restarts, reloads and instances, and never a UUID. */
export const environmentTokenId = (name: string) => `env:${name}`

/** An entry of PLANTSTORE_TOKENS has the name of a live stored token: names are unique across both. */
export class TokenNameClashError extends Error {
  constructor (name: string) {
    super(`PLANTSTORE_TOKENS: the name "${name}" is already used by a live token in the store; rename the entry or revoke that token`)
    this.name = 'TokenNameClashError'
  }
}

/**
 * How often a running service reads the store's token revision (`watch`), so a token made or revoked by
 * another instance or by the command line takes effect there within this (PostgreSQL also pushes changes
 * with `NOTIFY`).
 */
export const TOKEN_POLL_MS = 1_000

/** Accepted tokens remembered by their text; past this many the memory starts over. */
const MAX_REMEMBERED_TOKENS = 10_000

/**
 * The accepted tokens of this process: the entries of `PLANTSTORE_TOKENS` and the live tokens of the
 * store, held in memory so authenticating a request never queries the database.
 *
 * A presented token is digested and looked up by its digest. The lookup compares digests, not tokens:
 * whatever its timing tells, it is about the SHA-256 of the attacker's own guess, which brings them no
 * closer to a token (the reason stores index tokens by digest). The match is then confirmed with
 * `timingSafeEqual`. An accepted token is remembered by its text, so a client's next requests skip the
 * digest; a `Map` compares two strings' contents only when their hashes (seeded at random per process)
 * are equal, so a wrong guess learns nothing from that either.
 *
 * The store's tokens are read again whenever its revision changes: at once for changes this process
 * makes, on a `LISTEN` notification where the backend has them, and otherwise at the next poll.
 */
export class AccessTokenRegistry {
  #environment: ReadonlyArray<{ readonly token: TokenView, readonly digest: Buffer }> = []
  #stored: readonly VerifiableAccessToken[] = []
  #byDigest = new Map<string, { readonly identity: TokenIdentity, readonly digest: Buffer }>()
  #remembered = new Map<string, TokenIdentity>()
  #byId = new Map<string, TokenIdentity>()
  #revision: string | undefined
  #reads: Promise<void> = Promise.resolve()
  #pollTimer: NodeJS.Timeout | undefined
  #unwatch: (() => void) | undefined

  constructor (private readonly store: AccessTokenStore, configured: readonly ConfiguredToken[] = [], private readonly now: () => Date = () => new Date()) {
    this.#environment = this.#environmentTokens(configured)
    this.#index()
  }

  /** Which token this is, or undefined when it is unknown, expired or revoked. */
  identify (token: string): TokenIdentity | undefined {
    let identity = this.#remembered.get(token)
    if (identity === undefined) {
      const presented = digestToken(token)
      const candidate = this.#byDigest.get(presented.toString('latin1'))
      if (candidate === undefined || !timingSafeEqual(candidate.digest, presented)) return undefined
      identity = candidate.identity
      if (this.#remembered.size >= MAX_REMEMBERED_TOKENS) this.#remembered.clear()
      this.#remembered.set(token, identity)
    }
    return identity.expiresAtMs === Infinity || identity.expiresAtMs > Date.now() ? identity : undefined
  }

  /**
   * Whether this service token (not a JWT's identity) is still accepted with `scope`: the same secret,
   * neither revoked nor expired nor removed from the token file, and still granted the scope. A change
   * stream asks it again and again while it is open.
   */
  accepts (identity: TokenIdentity, scope: Scope): boolean {
    const current = this.#byId.get(identity.id)
    return current !== undefined && current.secretFingerprint === identity.secretFingerprint && grants(current.scopes, scope) &&
      (current.expiresAtMs === Infinity || current.expiresAtMs > Date.now())
  }

  /** Whether any token is configured in the environment. */
  get hasEnvironmentTokens (): boolean {
    return this.#environment.length > 0
  }

  /**
   * Reads the store's tokens. Without configured tokens, the first start on an empty store creates the
   * `initial-admin` token (all scopes) and resolves with it, the only time it is shown: committed, it is
   * returned even when reading the tokens back fails (the next poll reads them).
   */
  async load (): Promise<{ readonly initialAdminToken?: string }> {
    await this.refresh()
    if (this.hasEnvironmentTokens) return {}
    const secret = generateToken()
    const created = await this.store.createInitialAdmin(this.#newToken('initial-admin', SCOPES, undefined, secret))
    if (!created) return {}
    await this.refresh().catch(() => { this.#revision = undefined })
    return { initialAdminToken: secret }
  }

  /** Whether a live stored token has this name. */
  hasLiveStoredToken (name: string): boolean {
    const now = this.now()
    return this.#stored.some((token) => token.name === name && isLive(token, now))
  }

  /** Reads the store's tokens, after any read already under way: a change committed before this call is seen. */
  refresh (): Promise<void> {
    const read = this.#reads.then(async () => {
      const revision = await this.store.revision()
      this.#stored = await this.store.listVerifiable()
      this.#revision = revision
      this.#index()
    })
    this.#reads = read.catch(() => {})
    return read
  }

  /** Reads the store's tokens if its revision moved since the last read. */
  async refreshIfChanged (): Promise<void> {
    if (await this.store.revision() !== this.#revision) await this.refresh()
  }

  /**
   * Keeps the tokens current: a poll of the revision every `pollMs`, and the store's change
   * notifications where it has them. A check is skipped while the one before is still under way (a
   * database that does not answer). `onError` hears when reading starts to fail (the current tokens
   * stay), and `onRecovered` when it works again.
   */
  watch (pollMs: number, onError: (error: unknown) => void, onRecovered: () => void = () => {}): void {
    let checking = false
    let failing = false
    const check = () => {
      if (checking) return
      checking = true
      this.refreshIfChanged().then(
        () => {
          if (failing) onRecovered()
          failing = false
        },
        (error: unknown) => {
          if (!failing) onError(error)
          failing = true
        }
      ).finally(() => { checking = false })
    }
    this.#pollTimer = setInterval(check, pollMs).unref()
    this.#unwatch = this.store.watch?.(check)
  }

  /** Stops following the store, and resolves once no read of it is under way. */
  async stopWatching (): Promise<void> {
    clearInterval(this.#pollTimer)
    this.#unwatch?.()
    await this.#reads
  }

  /**
   * Replaces the `PLANTSTORE_TOKENS` entries (a reread token file). Refused, keeping the current ones,
   * when a name is also that of a live stored token: names are unique across both sources.
   */
  replaceEnvironment (configured: readonly ConfiguredToken[]): void {
    const clash = configured.find((token) => this.hasLiveStoredToken(token.name))
    if (clash !== undefined) throw new TokenNameClashError(clash.name)
    this.#environment = this.#environmentTokens(configured)
    this.#index()
  }

  /** Every token of both sources, newest first. */
  async list (): Promise<TokenView[]> {
    const stored = (await this.store.list()).map((token): TokenView => ({ ...token, source: 'store' }))
    return [...this.#environment.map(({ token }) => token), ...stored].sort(newestFirst)
  }

  /** The token with this id, or else the live token with this name. */
  async find (idOrName: string): Promise<TokenView | undefined> {
    const tokens = await this.list()
    const now = this.now()
    return tokens.find((token) => token.id === idOrName) ??
      tokens.find((token) => token.name === idOrName && isLive(token, now))
  }

  /** Makes a token; it is accepted by this process before this resolves. */
  async create (request: { readonly name: string, readonly scopes: readonly Scope[], readonly expiresAt?: Date }): Promise<CreateTokenResult> {
    if (this.#environment.some(({ token }) => token.name === request.name)) return { status: 'name-taken' }
    const secret = generateToken()
    const token = this.#newToken(request.name, request.scopes, request.expiresAt, secret)
    if (await this.store.create(token) === 'name-taken') return { status: 'name-taken' }
    await this.refresh()
    const { digest: _digest, ...record } = token
    return { status: 'created', token: record, secret }
  }

  /** Revokes a stored token; this process refuses it before this resolves. */
  async revoke (id: string): Promise<RevokeTokenResult> {
    const fromEnvironment = this.#environment.find(({ token }) => token.id === id)
    if (fromEnvironment !== undefined) return { status: 'environment', token: fromEnvironment.token }
    const token = await this.store.revoke(id, this.now())
    if (token === undefined) return { status: 'not-found' }
    await this.refresh()
    return { status: 'revoked', token }
  }

  #newToken (name: string, scopes: readonly Scope[], expiresAt: Date | undefined, secret: string): VerifiableAccessToken {
    return {
      id: randomUUID(),
      name,
      scopes: canonicalScopes(scopes),
      createdAt: this.now(),
      ...(expiresAt === undefined ? {} : { expiresAt }),
      digest: digestToken(secret)
    }
  }

  #environmentTokens (configured: readonly ConfiguredToken[]) {
    const loadedAt = this.now()
    return configured.map(({ name, scopes, digest }) => ({
      token: { id: environmentTokenId(name), name, scopes: canonicalScopes(scopes), source: 'environment' as const, createdAt: loadedAt },
      digest
    }))
  }

  /** Rebuilds the lookup from both sources, and forgets every remembered token (one may be revoked). */
  #index (): void {
    const byDigest = new Map<string, { identity: TokenIdentity, digest: Buffer }>()
    const byId = new Map<string, TokenIdentity>()
    const add = (token: AccessTokenRecord, digest: Buffer) => {
      const identity: TokenIdentity = {
        id: token.id,
        name: token.name,
        scopes: scopeSetOf(token.scopes),
        expiresAtMs: token.expiresAt?.getTime() ?? Infinity,
        secretFingerprint: createHash('sha256').update(digest).digest('base64url')
      }
      byDigest.set(digest.toString('latin1'), { identity, digest })
      byId.set(identity.id, identity)
    }
    for (const token of this.#stored) add(token, token.digest)
    // An environment entry wins over a stored token with the same digest.
    for (const { token, digest } of this.#environment) add(token, digest)
    this.#byDigest = byDigest
    this.#byId = byId
    this.#remembered = new Map()
  }
}
