import { hash } from 'node:crypto'
import { errors, jwtVerify, type JWTPayload } from 'jose'
import { isScope, scopeSetOf } from '../scope-sets.js'
import type { TokenIdentity } from '../token-registry.js'
import type { Scope } from '../../store/scopes.js'
import { DEFAULT_KEY_SET_TIMINGS, IssuerKeys, type KeySetLog, type KeySetTimings } from './issuer-keys.js'
import type { JwtSettings } from './jwt-settings.js'

/** The longest JWT looked at: the few claims of an access token fit in a fraction of it. */
export const MAX_JWT_LENGTH = 8192
/** Verified tokens remembered; past this many the oldest is forgotten first. */
const MAX_REMEMBERED_JWTS = 10_000
/** JWS compact serialization: header, payload and signature, each base64url (RFC 7515 §7.1). */
const JWT_FORM = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/

/** Hears why a JWT was refused; the client only ever learns that it was. */
export type JwtRefusal = (reason: string) => void

/** What metrics hear of JWTs: each fetch of the key set, and each first verification (remembered tokens are not verified again). */
export interface JwtObserver {
  keySetFetched (outcome: 'ok' | 'failed'): void
  verified (outcome: 'accepted' | 'refused'): void
}

type Verdict = { readonly identity: TokenIdentity } | { readonly refusal: string }

/** Whether a credential may be a JWT, judged cheaply (its length, two dots): what may be a remembered JWT. */
export function mayBeJwt (token: string): boolean {
  const firstDot = token.indexOf('.')
  return firstDot > 0 && token.length <= MAX_JWT_LENGTH && token.indexOf('.', firstDot + 1) > firstDot + 1
}

/** Whether a credential has a JWT's form; only such credentials are verified as JWTs. */
function hasJwtForm (token: string): boolean {
  return token.length <= MAX_JWT_LENGTH && JWT_FORM.test(token)
}

/**
 * Access tokens from the organisation's identity provider (docs/reference/jwt.md): a JWT whose
 * signature verifies with a key of the issuer's set, allowed algorithm, `iss`, `aud`, `exp` present and not
 * past, `nbf` and `iat` not in the future (within the tolerance), and a subject. Its scopes come from the
 * configured claim.
 *
 * A verified token is remembered by its digest until it expires, so a client repeating its token pays a
 * digest and a lookup, as for a service token, instead of a signature check. Requests that bring the same
 * new token at once share its one verification.
 */
export class JwtAccessTokens {
  readonly keys: IssuerKeys
  #verified = new Map<string, TokenIdentity>()
  #verifying = new Map<string, Promise<Verdict>>()
  /** Bumped when the key set changes: a verification begun under an older set is not remembered or joined. */
  #keySetGeneration = 0
  observer: JwtObserver | undefined

  constructor (readonly settings: JwtSettings, timings: KeySetTimings = DEFAULT_KEY_SET_TIMINGS) {
    this.keys = new IssuerKeys(settings, timings)
    // A key the provider removed must not keep vouching for the tokens it signed.
    this.keys.onChange = () => {
      this.#keySetGeneration++
      this.#verified.clear()
      this.#verifying.clear()
    }
    this.keys.onFetched = (outcome) => { this.observer?.keySetFetched(outcome) }
  }

  /** Fetches the issuer's keys (see IssuerKeys.start). */
  start (log: KeySetLog): Promise<void> {
    return this.keys.start(log)
  }

  stop (): void {
    this.keys.stop()
  }

  /**
   * Who this JWT is when it was verified before and has not expired, else undefined (without a verdict:
   * `identify` gives that). One digest and one lookup: what a repeated JWT costs.
   */
  remembered (token: string): TokenIdentity | undefined {
    const remembered = this.#verified.get(hash('sha256', token, 'base64'))
    return remembered !== undefined && remembered.expiresAtMs > Date.now() ? remembered : undefined
  }

  /**
   * Who this JWT is, or undefined when it is not accepted (`refused` hears why): at once for a token
   * verified before, otherwise once its signature is checked.
   */
  identify (token: string, refused: JwtRefusal): TokenIdentity | undefined | Promise<TokenIdentity | undefined> {
    if (!hasJwtForm(token)) {
      refused(`not a JWT of at most ${MAX_JWT_LENGTH} characters in compact form`)
      return undefined
    }
    const digest = hash('sha256', token, 'base64')
    const remembered = this.#verified.get(digest)
    if (remembered !== undefined) {
      if (remembered.expiresAtMs > Date.now()) return remembered
      this.#verified.delete(digest)
      refused('ERR_JWT_EXPIRED: "exp" claim timestamp check failed')
      return undefined
    }
    let verdict = this.#verifying.get(digest)
    if (verdict === undefined) {
      const generation = this.#keySetGeneration
      const verifying: Promise<Verdict> = this.#verify(token).then((outcome) => {
        if (this.#verifying.get(digest) === verifying) this.#verifying.delete(digest)
        if ('identity' in outcome && generation === this.#keySetGeneration) this.#remember(digest, outcome.identity)
        this.observer?.verified('identity' in outcome ? 'accepted' : 'refused')
        return outcome
      })
      verdict = verifying
      this.#verifying.set(digest, verdict)
    }
    return verdict.then((outcome) => {
      if ('identity' in outcome) return outcome.identity
      refused(outcome.refusal)
      return undefined
    })
  }

  async #verify (token: string): Promise<Verdict> {
    const { issuer, audiences, algorithms, clockToleranceS } = this.settings
    let payload: JWTPayload
    try {
      ({ payload } = await jwtVerify(token, this.keys.key, {
        issuer,
        audience: [...audiences],
        algorithms: [...algorithms],
        clockTolerance: clockToleranceS,
        requiredClaims: ['exp']
      }))
    } catch (error) {
      return { refusal: reasonOf(error) }
    }
    if (typeof payload.iat === 'number' && payload.iat > Date.now() / 1000 + clockToleranceS) {
      return { refusal: '"iat" claim timestamp check failed (it should be in the past)' }
    }
    const subject = nonEmptyString(payload.sub) ?? nonEmptyString(payload.client_id)
    if (subject === undefined) return { refusal: 'the token names no subject: neither "sub" nor "client_id" is a string' }
    const name = `jwt:${subject}`
    return {
      identity: {
        id: name,
        name,
        scopes: scopeSetOf(scopesOf(payload[this.settings.scopeClaim])),
        expiresAtMs: ((payload.exp as number) + clockToleranceS) * 1000
      }
    }
  }

  #remember (digest: string, identity: TokenIdentity): void {
    if (this.#verified.size >= MAX_REMEMBERED_JWTS) {
      const oldest = this.#verified.keys().next()
      if (oldest.done !== true) this.#verified.delete(oldest.value)
    }
    this.#verified.set(digest, identity)
  }
}

/** The plantstore scopes of a scope claim: RFC 9068's space-separated string, or an array of strings (`scp`, `roles`). */
function scopesOf (claim: unknown): Scope[] {
  const values = typeof claim === 'string' ? claim.split(' ') : Array.isArray(claim) ? claim : []
  return values.filter((value): value is Scope => typeof value === 'string' && isScope(value))
}

function nonEmptyString (value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** Why jose refused a token, for the debug log: its error code and message, which never hold the token. */
function reasonOf (error: unknown): string {
  if (error instanceof errors.JOSEError) return `${error.code}: ${error.message}`
  return error instanceof Error ? error.message : String(error)
}
