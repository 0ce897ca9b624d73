/**
 * The catalogue of every error plantstore answers with: one factory per failure, fixing its HTTP
 * status, its message and its headers. The error envelope turns any of them into `{error, message}`.
 */

export class PlantstoreError extends Error {
  readonly statusCode: number
  /** Extra response headers, such as `Retry-After` or `WWW-Authenticate`. */
  readonly headers: Readonly<Record<string, string>>

  constructor (statusCode: number, message: string, headers: Record<string, string> = {}) {
    super(message)
    this.name = 'PlantstoreError'
    this.statusCode = statusCode
    this.headers = headers
  }
}

const RETRY_AFTER_SECONDS = '1'
const BEARER_REALM = 'Bearer realm="plantstore"'

// 400 -------------------------------------------------------------------------------------------

export const invalidRequest = (message: string) =>
  new PlantstoreError(400, message)

export const invalidJson = (detail: string) =>
  new PlantstoreError(400, `request body is not valid JSON: ${detail}`)

export const malformedUrl = () =>
  new PlantstoreError(400, 'the request URL is malformed')

export const missingHost = () =>
  new PlantstoreError(400, 'HTTP/1.1 requests need a Host header')

export const duplicateHost = () =>
  new PlantstoreError(400, 'the request has more than one Host header')

export const malformedHttp = () =>
  new PlantstoreError(400, 'the HTTP request is malformed')

export const plantIdMismatch = (pathId: bigint, bodyId: bigint) =>
  new PlantstoreError(400, `id in the body (${bodyId}) must equal the id in the path (${pathId}); a plant's id cannot change`)

// 401 -------------------------------------------------------------------------------------------

export const missingCredentials = () =>
  new PlantstoreError(401,
    'this operation needs an "Authorization: Bearer <token>" header',
    { 'www-authenticate': BEARER_REALM })

export const invalidToken = () =>
  new PlantstoreError(401,
    'the bearer token is missing, malformed or not accepted',
    { 'www-authenticate': `${BEARER_REALM}, error="invalid_token"` })

// 403 -------------------------------------------------------------------------------------------

export const insufficientScope = (scope: string) =>
  new PlantstoreError(403,
    `this token lacks the scope "${scope}", which this operation needs`,
    { 'www-authenticate': `${BEARER_REALM}, error="insufficient_scope", scope="${scope}"` })

// 404 -------------------------------------------------------------------------------------------

export const routeNotFound = (method: string, path: string) =>
  new PlantstoreError(404, `no route ${method} ${path}`)

export const plantNotFound = (id: bigint) =>
  new PlantstoreError(404, `no plant has id ${id}`)

export const accessTokenNotFound = (id: string) =>
  new PlantstoreError(404, `no access token has id ${JSON.stringify(id)}`)

export const webhookNotFound = (id: string) =>
  new PlantstoreError(404, `no webhook subscription has id ${JSON.stringify(id)}`)

// 405 -------------------------------------------------------------------------------------------

export const methodNotAllowed = (method: string, path: string, allowed: readonly string[]) =>
  new PlantstoreError(405,
    `${path} does not support ${method}; allowed: ${allowed.join(', ')}`,
    { allow: allowed.join(', ') })

// 408 -------------------------------------------------------------------------------------------

export const requestTimeout = () =>
  new PlantstoreError(408, 'the request was not received in time')

// 409 -------------------------------------------------------------------------------------------

export const plantIdConflict = (id: bigint) =>
  new PlantstoreError(409,
    `plant ${id} already exists with a different name or tag`)

export const accessTokenNameTaken = (name: string) =>
  new PlantstoreError(409, `a live access token is already named "${name}"; revoke it or choose another name`)

export const environmentTokenNotRevocable = (name: string) =>
  new PlantstoreError(409,
    `the access token "${name}" comes from the environment and cannot be revoked over HTTP: remove it from ` +
    'the token file and send SIGHUP, or from PLANTSTORE_TOKENS and restart')

// 410 -------------------------------------------------------------------------------------------

export const changesExpired = (after: bigint) =>
  new PlantstoreError(410, `changes after seq ${after} are no longer kept (CHANGES_RETENTION): read the plants again ` +
    '(GET /plants/changes/head, then the plants, then the changes after that head)')

// 412 -------------------------------------------------------------------------------------------

export const preconditionFailed = (id: bigint, exists: boolean) =>
  new PlantstoreError(412, exists
    ? `plant ${id} is not in the state the request's If-Match or If-None-Match expects; read it again for its current ETag`
    : `plant ${id} does not exist, and the request's If-Match needs it to`)

// 413 -------------------------------------------------------------------------------------------

export const bodyTooLarge = (limit: number) =>
  new PlantstoreError(413, `request body is larger than ${limit} bytes`)

// 414 -------------------------------------------------------------------------------------------

export const uriTooLong = () =>
  new PlantstoreError(414, 'a path segment of the request URL is too long')

// 415 -------------------------------------------------------------------------------------------

export const unsupportedMediaType = (detail: string) =>
  new PlantstoreError(415, detail)

// 429 -------------------------------------------------------------------------------------------

export const tooManyRequests = (retryAfterSeconds: number) =>
  new PlantstoreError(429, `too many requests for this token, retry in ${retryAfterSeconds} s`,
    { 'retry-after': String(retryAfterSeconds) })

export const tooManyFailedAuthentications = (retryAfterSeconds: number) =>
  new PlantstoreError(429, `too many failed authentications from this address, retry in ${retryAfterSeconds} s`,
    { 'retry-after': String(retryAfterSeconds) })

// 431 -------------------------------------------------------------------------------------------

export const headersTooLarge = () =>
  new PlantstoreError(431, 'the request headers are too large')

// 500 -------------------------------------------------------------------------------------------

export const internalError = (requestId: string) =>
  new PlantstoreError(500,
    `internal error; quote request id ${requestId} to the operator`)

// 503 -------------------------------------------------------------------------------------------

export const storeUnavailable = (requestId: string) =>
  new PlantstoreError(503,
    `storage is unavailable, retry later; request id ${requestId}`,
    { 'retry-after': RETRY_AFTER_SECONDS })

export const overloaded = (requestId: string) =>
  new PlantstoreError(503, `the service is overloaded, retry later; request id ${requestId}`,
    { 'retry-after': RETRY_AFTER_SECONDS })

export const batchKeptChanging = (attempts: number, requestId: string) =>
  new PlantstoreError(503, `the batch's plants were changed by other writes each of the ${attempts} times it was decided; nothing was applied, retry later; request id ${requestId}`,
    { 'retry-after': RETRY_AFTER_SECONDS })

export const tooManyChangeStreams = (max: number) =>
  new PlantstoreError(503, `this instance has ${max} change streams open, its most (CHANGES_STREAMS_MAX); retry later or poll GET /plants/changes`,
    { 'retry-after': '5' })

export const shuttingDown = (requestId: string) =>
  new PlantstoreError(503, `the service is shutting down, retry later; request id ${requestId}`,
    { 'retry-after': RETRY_AFTER_SECONDS, connection: 'close' })
