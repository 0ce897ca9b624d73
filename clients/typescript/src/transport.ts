import { PlantstoreError } from './errors.js'
import { jsonText, parseJson } from './json.js'
import { RETRIED_STATUSES, RetryPolicy, retryAfterSeconds, sleep, type RetryDelay } from './retry-policy.js'

/** The `fetch` the client calls: the global one unless the options give another (a mock, an agent's, a polyfill). */
export type Fetch = (url: string, init: RequestInit) => Promise<Response>

export interface TransportOptions {
  /** Where the service answers, such as `http://127.0.0.1:3000`; a path prefix (behind a proxy) is kept. */
  readonly baseUrl: string | URL
  /** A bearer token with the scopes of the calls made: `plants:read`, `plants:write`. */
  readonly token: string
  readonly fetch?: Fetch | undefined
  /** How many times a failed call that is safe to repeat is sent again (default 3; 0 never). */
  readonly retries?: number | undefined
  readonly retryDelay?: RetryDelay | undefined
  /** Sent as `User-Agent`. Browsers may refuse it on a page of another origin: leave it out there. */
  readonly userAgent?: string | undefined
}

export type Query = Readonly<Record<string, string | undefined>>

export interface Call {
  readonly method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** Below the base URL, each segment already canonical (ids are decimal digits). */
  readonly path: string
  /** Parameters (undefined ones are left out), or a search string taken from a `Link`. */
  readonly query?: Query | string | undefined
  readonly headers?: Readonly<Record<string, string | undefined>> | undefined
  /** A JSON value, bigints written exactly. */
  readonly body?: unknown
  readonly contentType?: string | undefined
  /** Whether the call may be sent again after a 429, a 503 or a network failure: doing it twice does what once does. */
  readonly repeatable: boolean
  readonly signal?: AbortSignal | undefined
}

export interface Answer {
  readonly status: number
  readonly headers: Headers
  /** The parsed body, integers beyond 2^53 as bigints; undefined when there is none. */
  readonly body: unknown
  readonly url: string
}

/** The client's one way to the service: URLs, the token, exact JSON both ways, errors, and retries. */
export class Transport {
  readonly policy: RetryPolicy
  private readonly base: string
  private readonly fetch: Fetch
  private readonly headers: Readonly<Record<string, string>>

  constructor (options: TransportOptions) {
    // A token no header can carry would make every fetch fail as if the network had, and be retried.
    if (!/^[\x21-\x7e]+$/.test(options.token)) throw new TypeError('token must be printable ASCII without spaces, as a bearer token is')
    this.base = new URL(options.baseUrl).href.replace(/\/+$/, '')
    this.fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init))
    this.headers = {
      authorization: `Bearer ${options.token}`,
      ...(options.userAgent === undefined ? {} : { 'user-agent': options.userAgent })
    }
    this.policy = new RetryPolicy(options.retries ?? 3, options.retryDelay)
  }

  url (path: string, query?: Query | string): string {
    return `${this.base}${path}${typeof query === 'string' ? query : searchOf(query)}`
  }

  /**
   * Sends the call and resolves with its 2xx answer; any other answer is thrown as a PlantstoreError. A
   * repeatable call is sent again after a 429, a 503 or a network failure while the policy allows, after
   * the answer's `Retry-After` or the policy's backoff. An abort is thrown as the signal's reason.
   */
  async send (call: Call): Promise<Answer> {
    const url = this.url(call.path, call.query)
    const init = this.init(call)
    for (let failures = 0; ; failures++) {
      const outcome = await this.attempt(url, init, call)
      if (!(outcome instanceof PlantstoreError)) return outcome
      const retried = call.repeatable && failures < this.policy.retries && (outcome.status === 0 || RETRIED_STATUSES.has(outcome.status))
      const delay = retried ? this.policy.delayAfter(failures, outcome.retryAfter) : undefined
      if (delay === undefined) throw outcome
      await sleep(delay, call.signal)
    }
  }

  /** Sends the call once and resolves with its 2xx response, its body unread (a stream), or the error of anything else. */
  async open (call: Call): Promise<Response | PlantstoreError> {
    const url = this.url(call.path, call.query)
    let response: Response
    try {
      response = await this.fetch(url, this.init(call))
    } catch (cause) {
      return noAnswer(call, url, cause)
    }
    if (response.ok) return response
    const text = await response.text().catch(() => '')
    return errorOf(call, response, text)
  }

  private async attempt (url: string, init: RequestInit, call: Call): Promise<Answer | PlantstoreError> {
    let response: Response
    let text: string
    try {
      response = await this.fetch(url, init)
      text = await response.text()
    } catch (cause) {
      return noAnswer(call, url, cause)
    }
    if (!response.ok) return errorOf(call, response, text)
    let body: unknown
    try {
      body = text === '' ? undefined : parseJson(text)
    } catch (cause) {
      throw new PlantstoreError({ status: response.status, message: `${call.method} ${call.path} answered ${response.status} with a body that is not JSON`, requestId: requestIdOf(response), cause })
    }
    return { status: response.status, headers: response.headers, body, url }
  }

  private init (call: Call): RequestInit {
    const headers: Record<string, string> = { ...this.headers }
    for (const [name, value] of Object.entries(call.headers ?? {})) {
      if (value !== undefined) headers[name] = value
    }
    const init: RequestInit = { method: call.method, headers }
    if (call.body !== undefined) {
      headers['content-type'] = call.contentType ?? 'application/json'
      init.body = jsonText(call.body)
    }
    if (call.signal !== undefined) init.signal = call.signal
    return init
  }
}

function searchOf (query: Query | undefined): string {
  const parameters = new URLSearchParams()
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined) parameters.append(name, value)
  }
  const text = parameters.toString()
  return text === '' ? '' : `?${text}`
}

/** The failure of a call that got no answer; an abort is no failure of the network, and is thrown as the signal's reason. */
function noAnswer (call: Call, url: string, cause: unknown): PlantstoreError {
  if (call.signal?.aborted === true) throw call.signal.reason
  return new PlantstoreError({ status: 0, error: 0, message: `${call.method} ${url} got no answer: ${describe(cause)}`, cause })
}

function describe (cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause)
  return cause.cause instanceof Error ? `${cause.message} (${cause.cause.message})` : cause.message
}

/** The service's `Error` body when the answer has one; else the status stands for both `error` and `message`. */
function errorOf (call: Call, response: Response, text: string): PlantstoreError {
  let envelope: { error?: unknown, message?: unknown } = {}
  try {
    const body = parseJson(text)
    if (typeof body === 'object' && body !== null) envelope = body
  } catch {}
  return new PlantstoreError({
    status: response.status,
    error: typeof envelope.error === 'number' ? envelope.error : response.status,
    message: typeof envelope.message === 'string'
      ? envelope.message
      : `${call.method} ${call.path} answered ${response.status}${response.statusText === '' ? '' : ` ${response.statusText}`}`,
    requestId: requestIdOf(response),
    retryAfter: retryAfterSeconds(response.headers.get('retry-after'))
  })
}

const requestIdOf = (response: Response): string | undefined => response.headers.get('x-request-id') ?? undefined
