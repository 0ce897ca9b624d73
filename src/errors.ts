/**
 * The catalogue of every error plantstore answers with. Each entry fixes the HTTP status and the
 * `PLANTSTORE_*` code; the error envelope turns any of them into the `{error, message}` body.
 */

export class PlantstoreError extends Error {
  readonly code: string
  readonly statusCode: number
  /** Extra response headers, such as `Retry-After` or `WWW-Authenticate`. */
  readonly headers: Readonly<Record<string, string>>

  constructor (code: string, statusCode: number, message: string, headers: Record<string, string> = {}) {
    super(message)
    this.name = 'PlantstoreError'
    this.code = code
    this.statusCode = statusCode
    this.headers = headers
  }
}

const RETRY_AFTER_SECONDS = '1'
const BEARER_REALM = 'Bearer realm="plantstore"'

// 400 ------------------------------------------------------------------------------------------

export const invalidRequest = (message: string) =>
  new PlantstoreError('PLANTSTORE_INVALID_REQUEST', 400, message)

export const invalidJson = (detail: string) =>
  new PlantstoreError('PLANTSTORE_INVALID_JSON', 400, `request body is not valid JSON: ${detail}`)

export const malformedHttp = () =>
  new PlantstoreError('PLANTSTORE_MALFORMED_HTTP', 400, 'the HTTP request is malformed')

// 401 ------------------------------------------------------------------------------------------

export const missingCredentials = () =>
  new PlantstoreError('PLANTSTORE_UNAUTHENTICATED', 401,
    'this operation needs an "Authorization: Bearer <token>" header',
    { 'www-authenticate': BEARER_REALM })

export const invalidToken = () =>
  new PlantstoreError('PLANTSTORE_INVALID_TOKEN', 401,
    'the bearer token is missing, malformed or not accepted',
    { 'www-authenticate': `${BEARER_REALM}, error="invalid_token"` })

// 404 / 405 / 408 / 409 ------------------------------------------------------------------------

export const routeNotFound = (method: string, path: string) =>
  new PlantstoreError('PLANTSTORE_ROUTE_NOT_FOUND', 404, `no route ${method} ${path}`)

export const methodNotAllowed = (method: string, path: string, allowed: readonly string[]) =>
  new PlantstoreError('PLANTSTORE_METHOD_NOT_ALLOWED', 405,
    `${path} does not support ${method}; allowed: ${allowed.join(', ')}`,
    { allow: allowed.join(', ') })

export const requestTimeout = () =>
  new PlantstoreError('PLANTSTORE_REQUEST_TIMEOUT', 408, 'the request was not received in time')

export const plantIdConflict = (id: bigint) =>
  new PlantstoreError('PLANTSTORE_ID_CONFLICT', 409,
    `plant ${id} already exists with a different name or tag`)

// 413 / 415 / 431 ------------------------------------------------------------------------------

export const bodyTooLarge = (limit: number) =>
  new PlantstoreError('PLANTSTORE_BODY_TOO_LARGE', 413, `request body is larger than ${limit} bytes`)

export const unsupportedMediaType = (detail: string) =>
  new PlantstoreError('PLANTSTORE_UNSUPPORTED_MEDIA_TYPE', 415, detail)

export const headersTooLarge = () =>
  new PlantstoreError('PLANTSTORE_HEADERS_TOO_LARGE', 431, 'the request headers are too large')

// 5xx ------------------------------------------------------------------------------------------

export const internalError = (requestId: string) =>
  new PlantstoreError('PLANTSTORE_INTERNAL', 500,
    `internal error; quote request id ${requestId} to the operator`)

export const storeUnavailable = (requestId: string) =>
  new PlantstoreError('PLANTSTORE_STORE_UNAVAILABLE', 503,
    `storage is unavailable, retry later; request id ${requestId}`,
    { 'retry-after': RETRY_AFTER_SECONDS })

export const shuttingDown = () =>
  new PlantstoreError('PLANTSTORE_SHUTTING_DOWN', 503, 'the service is shutting down, retry later',
    { 'retry-after': RETRY_AFTER_SECONDS, connection: 'close' })

/** Thrown by storage adapters when the database cannot serve the request right now (busy, down, full). */
export class StoreUnavailableError extends Error {
  constructor (message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}
