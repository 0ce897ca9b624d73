import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose'
import type { JwtSettings } from './jwt-settings.js'

/** How the key set follows the provider; the defaults are the documented ones, tests shorten them. */
export interface KeySetTimings {
  /** One fetch, discovery and key set together, gives up after this long. */
  readonly fetchTimeoutMs: number
  /** A token with a key id the set does not hold makes a fetch only if none was attempted this long before. */
  readonly refetchCooldownMs: number
  /** The set is fetched again this often in the background, so keys the provider removed stop being accepted. */
  readonly refreshMs: number
}

export const DEFAULT_KEY_SET_TIMINGS: KeySetTimings = Object.freeze({ fetchTimeoutMs: 5000, refetchCooldownMs: 30_000, refreshMs: 600_000 })

/** A discovery document or key set larger than this is refused: no provider publishes anything near it. */
const MAX_DOCUMENT_BYTES = 1024 * 1024

/** What the key set tells the operator: its first failure of a streak, and the fetch that works again. */
export interface KeySetLog {
  fetchFailed (reason: string): void
  fetchRecovered (): void
}

type LocalKeySet = ReturnType<typeof createLocalJWKSet>

/** A fetched key set: its text (to tell a changed set from the one held) and its lookup. */
interface DownloadedKeySet {
  readonly text: string
  readonly keys: LocalKeySet
}

/**
 * The identity provider's public keys, as jose's key lookup for `jwtVerify`: fetched at start, kept, and
 * fetched again for a key id the set does not hold (at most once per cooldown, whatever the outcome, so
 * tokens with made-up key ids cannot make the service hammer the provider) and in the background. A
 * failed fetch keeps the keys already held, and waits for no fetch longer than its time-out.
 *
 * jose's own remote key set is not used: it forgets working keys when a refresh fails past their
 * maximum age, starts no cooldown after a failed fetch, and knows no OpenID Connect discovery.
 */
export class IssuerKeys {
  #keys: LocalKeySet | undefined
  #keySetText: string | undefined
  #fetching: Promise<boolean> | undefined
  /** On the monotonic clock, so a step of the wall clock neither blocks nor hastens a refetch. */
  #lastAttemptMs = Number.NEGATIVE_INFINITY
  #stopped = false
  /** Aborted by its time-out, or by `stop`: a fetch under way does not hold up a closing app. */
  #inFlight: AbortController | undefined
  #failing = false
  #refreshTimer: NodeJS.Timeout | undefined
  #log: KeySetLog = { fetchFailed: () => {}, fetchRecovered: () => {} }
  /** Called when a fetch brings a set that differs from the one held before. */
  onChange: () => void = () => {}
  /** Called when a fetch ends, whether it brought a set. */
  onFetched: (outcome: 'ok' | 'failed') => void = () => {}

  constructor (
    private readonly source: Pick<JwtSettings, 'issuer' | 'jwksUrl'>,
    private readonly timings: KeySetTimings = DEFAULT_KEY_SET_TIMINGS
  ) {}

  /** Fetches the set once (never rejecting: a provider that is down is logged, and retried later) and starts the background refresh. */
  async start (log: KeySetLog): Promise<void> {
    this.#log = log
    this.#refreshTimer = setInterval(() => { this.#fetchUnlessUnderWay().catch(() => {}) }, this.timings.refreshMs).unref()
    await this.#fetchUnlessUnderWay()
  }

  stop (): void {
    clearInterval(this.#refreshTimer)
    this.#stopped = true
    this.#inFlight?.abort()
  }

  /** The key a token's header names, for jose's `jwtVerify`. */
  readonly key: JWTVerifyGetKey = async (header, token) => {
    if (this.#keys !== undefined) {
      try {
        return await this.#keys(header, token)
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey)) throw error
      }
    }
    const fetched = this.#fetching ?? (performance.now() - this.#lastAttemptMs >= this.timings.refetchCooldownMs ? this.#fetch() : undefined)
    if (fetched === undefined) throw new errors.JWKSNoMatchingKey('no key of the set matches the token, and the set was fetched less than the cooldown ago')
    if (!await fetched || this.#keys === undefined) throw new errors.JWKSNoMatchingKey('no key matches the token, and the key set cannot be fetched')
    return this.#keys(header, token)
  }

  #fetchUnlessUnderWay (): Promise<boolean> {
    return this.#fetching ?? this.#fetch()
  }

  #fetch (): Promise<boolean> {
    this.#lastAttemptMs = performance.now()
    const fetching = this.#download().then(
      (downloaded) => {
        this.#install(downloaded)
        if (this.#failing) this.#log.fetchRecovered()
        this.#failing = false
        this.onFetched('ok')
        return true
      },
      (error: unknown) => {
        if (this.#stopped) return false
        if (!this.#failing) this.#log.fetchFailed(error instanceof Error ? error.message : String(error))
        this.#failing = true
        this.onFetched('failed')
        return false
      }
    ).finally(() => { this.#fetching = undefined })
    this.#fetching = fetching
    return fetching
  }

  #install ({ text, keys }: DownloadedKeySet): void {
    if (text === this.#keySetText) return
    const changed = this.#keySetText !== undefined
    this.#keys = keys
    this.#keySetText = text
    if (changed) this.onChange()
  }

  /** The set, checked and ready for lookups: a malformed set is refused here, not at the first token. */
  async #download (): Promise<DownloadedKeySet> {
    if (this.#stopped) throw new Error('stopped')
    // A timer of our own rather than AbortSignal.timeout: Node 20 lets a timeout signal that only
    // AbortSignal.any refers to be collected, and then it never fires (a hanging provider held the fetch).
    const abort = new AbortController()
    const timer = setTimeout(() => { abort.abort(new DOMException('the fetch timed out', 'TimeoutError')) }, this.timings.fetchTimeoutMs)
    this.#inFlight = abort
    try {
      return await this.#downloadWith(abort.signal)
    } finally {
      clearTimeout(timer)
      this.#inFlight = undefined
    }
  }

  async #downloadWith (signal: AbortSignal): Promise<DownloadedKeySet> {
    const jwksUrl = this.source.jwksUrl ?? await this.#discoverKeySetUrl(signal)
    const keySet = await fetchJson(jwksUrl, signal)
    if (!isKeySet(keySet)) throw new Error(`the key set at ${jwksUrl} is not a JSON Web Key Set`)
    if (keySet.keys.length === 0) throw new Error(`the key set at ${jwksUrl} holds no key`)
    // A malformed key would take the place of the working ones; a key of another type or use is only ignored.
    const malformed = keySet.keys.find((key) => !isWellFormedKey(key))
    if (malformed !== undefined) throw new Error(`the key set at ${jwksUrl} holds a malformed key (kid ${JSON.stringify(malformed.kid)})`)
    return { text: JSON.stringify(keySet), keys: createLocalJWKSet(keySet) }
  }

  /** OpenID Connect Discovery 1.0 §4: the document under the issuer, whose `issuer` must be the issuer itself. */
  async #discoverKeySetUrl (signal: AbortSignal): Promise<string> {
    const url = `${this.source.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`
    const document = await fetchJson(url, signal)
    if (typeof document !== 'object' || document === null) throw new Error(`the discovery document at ${url} is not a JSON object`)
    const { issuer, jwks_uri: jwksUri } = document as Record<string, unknown>
    if (issuer !== this.source.issuer) throw new Error(`the discovery document at ${url} names the issuer ${JSON.stringify(issuer)}, not AUTH_JWT_ISSUER`)
    if (typeof jwksUri !== 'string' || !URL.canParse(jwksUri) || !/^https?:$/.test(new URL(jwksUri).protocol)) {
      throw new Error(`the discovery document at ${url} has no http or https jwks_uri`)
    }
    if (isHttps(this.source.issuer) && !isHttps(jwksUri)) {
      throw new Error(`the discovery document at ${url} names a jwks_uri that is not https under an https issuer`)
    }
    return jwksUri
  }
}

/** RFC 7518 §6: the members each key type cannot do without (jose checks them only when a token needs the key). */
const REQUIRED_MEMBERS: Readonly<Record<string, readonly string[]>> = { RSA: ['n', 'e'], EC: ['crv', 'x', 'y'], OKP: ['crv', 'x'], oct: ['k'] }

function isWellFormedKey (key: unknown): boolean {
  if (typeof key !== 'object' || key === null) return false
  const members = key as Record<string, unknown>
  if (typeof members.kty !== 'string') return false
  return (REQUIRED_MEMBERS[members.kty] ?? []).every((member) => typeof members[member] === 'string')
}

function isHttps (url: string): boolean {
  return new URL(url).protocol === 'https:'
}

function isKeySet (value: unknown): value is JSONWebKeySet {
  return typeof value === 'object' && value !== null && Array.isArray((value as { keys?: unknown }).keys)
}

/** A 200 answer's JSON, read up to MAX_DOCUMENT_BYTES. */
async function fetchJson (url: string, signal: AbortSignal): Promise<unknown> {
  const response = await fetchStayingOnHttps(url, signal)
  if (response.status !== 200) {
    await response.body?.cancel()
    throw new Error(`${url} answered ${response.status}`)
  }
  const text = await readLimited(response, url)
  try {
    return JSON.parse(text)
  } catch {
    throw new Error(`${url} did not answer JSON`)
  }
}

/** The most redirects one fetch follows. */
const MAX_REDIRECTS = 5

/**
 * Fetches `url`, following the redirects of an https URL here, one by one, and never to a URL that is not
 * https: fetch itself would check only where the chain ends, so https → http → https would pass, and
 * whoever answers the http step could name any key set.
 */
async function fetchStayingOnHttps (url: string, signal: AbortSignal): Promise<Response> {
  const stayOnHttps = isHttps(url)
  let current = url
  for (let redirects = 0; ; redirects++) {
    let response
    try {
      response = await fetch(current, { signal, headers: { accept: 'application/json' }, redirect: stayOnHttps ? 'manual' : 'follow' })
    } catch (error) {
      throw new Error(`${url} cannot be fetched: ${describe(error)}`)
    }
    const location = response.headers.get('location')
    if (!stayOnHttps || response.status < 300 || response.status > 399 || location === null) return response
    await response.body?.cancel()
    const next = URL.canParse(location, current) ? new URL(location, current).href : undefined
    if (next === undefined || !isHttps(next)) throw new Error(`${url} redirected to a URL that is not https`)
    if (redirects === MAX_REDIRECTS) throw new Error(`${url} redirected more than ${MAX_REDIRECTS} times`)
    current = next
  }
}

async function readLimited (response: Response, url: string): Promise<string> {
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    // Leaving the loop early cancels the body.
    for await (const chunk of response.body ?? []) {
      size += chunk.byteLength
      if (size > MAX_DOCUMENT_BYTES) break
      chunks.push(chunk)
    }
  } catch (error) {
    throw new Error(`${url} could not be read: ${describe(error)}`)
  }
  if (size > MAX_DOCUMENT_BYTES) throw new Error(`${url} answered more than ${MAX_DOCUMENT_BYTES} bytes`)
  return Buffer.concat(chunks).toString('utf8')
}

function describe (error: unknown): string {
  if (error instanceof Error && error.name === 'TimeoutError') return 'it did not answer in time'
  const reason = error instanceof Error && error.cause instanceof Error ? error.cause : error
  // A host with several addresses fails with an AggregateError whose own message is empty.
  if (reason instanceof AggregateError && reason.errors.length > 0) return reason.errors.map(describe).join(', ')
  if (!(reason instanceof Error)) return String(reason)
  return reason.message !== '' ? reason.message : (reason as { code?: string }).code ?? reason.name
}
