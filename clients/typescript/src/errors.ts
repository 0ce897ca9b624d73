export interface PlantstoreErrorDetails {
  /** The answer's HTTP status; 0 when no answer came (the network failed: see `cause`). */
  readonly status: number
  /** The `error` member of the service's `Error` body: the status again, or 0 without an answer. */
  readonly error?: number | undefined
  readonly message: string
  /** The answer's `x-request-id`: what the service's log lines of this request carry. */
  readonly requestId?: string | undefined
  /** The answer's `Retry-After`, in seconds. */
  readonly retryAfter?: number | undefined
  readonly cause?: unknown
}

/** Every failure of a call: a non-2xx answer, or none at all (`status` 0, and the network's error as `cause`). */
export class PlantstoreError extends Error {
  override name = 'PlantstoreError'
  readonly status: number
  readonly error: number
  readonly requestId: string | undefined
  readonly retryAfter: number | undefined

  constructor (details: PlantstoreErrorDetails) {
    super(details.message, details.cause === undefined ? undefined : { cause: details.cause })
    this.status = details.status
    this.error = details.error ?? details.status
    this.requestId = details.requestId
    this.retryAfter = details.retryAfter
  }
}

/**
 * 410 from the changes feed: the changes after the resume point are no longer kept. Read the plants
 * again (`changes.head()`, then `plants.list()`), then follow from that head.
 */
export class ChangesExpiredError extends PlantstoreError {
  override name = 'ChangesExpiredError'
}
