export interface RetryDelay {
  /** The first computed wait, in milliseconds; each further one doubles it (default 250). */
  readonly initialMs?: number | undefined
  /**
   * The longest wait, in milliseconds (default 30,000). A `Retry-After` longer than this is not waited
   * for: the call fails at once, and its error carries `retryAfter`.
   */
  readonly maxMs?: number | undefined
}

/** 429 and 503 say "not now": the request did nothing, and the same request may succeed later. */
export const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 503])

/** When to try again: the service's `Retry-After`, else an exponential backoff with jitter. */
export class RetryPolicy {
  private readonly initialMs: number
  private readonly maxMs: number

  constructor (readonly retries: number, delay: RetryDelay = {}) {
    if (!Number.isInteger(retries) || retries < 0) throw new RangeError(`retries must be a whole number ≥ 0, not ${retries}`)
    this.initialMs = delay.initialMs ?? 250
    this.maxMs = delay.maxMs ?? 30_000
  }

  /**
   * The wait before attempt `failures + 1`, in milliseconds: the service's `Retry-After`, or undefined
   * when it asks for a longer wait than the policy allows; without one, the backoff. The backoff's jitter
   * keeps half of it and draws the other half, so clients that failed together do not return together.
   */
  delayAfter (failures: number, retryAfterSeconds?: number): number | undefined {
    if (retryAfterSeconds === undefined) return this.backoff(failures)
    const asked = retryAfterSeconds * 1000
    return asked <= this.maxMs ? asked : undefined
  }

  backoff (failures: number): number {
    const ceiling = Math.min(this.maxMs, this.initialMs * 2 ** failures)
    return ceiling / 2 + Math.random() * ceiling / 2
  }
}

/** `Retry-After` (RFC 9110 §10.2.3) in seconds from now: delay-seconds or an HTTP-date; undefined when absent or unreadable. */
export function retryAfterSeconds (header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined
  const text = header.trim()
  if (/^\d+$/.test(text)) return Number(text)
  const date = Date.parse(text)
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000))
}

/** Resolves after `ms`; rejects with the signal's reason as soon as it aborts. */
export function sleep (ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason)
      return
    }
    const abort = (): void => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', abort, { once: true })
  })
}
