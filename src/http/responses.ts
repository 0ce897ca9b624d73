import type { TSchema } from '@sinclair/typebox'
import { ErrorBody } from '../schemas/error-body.js'
import { ref } from '../schemas/kinds.js'

const errorResponse = (description: string, headers?: Record<string, { type: 'string', description: string }>) =>
  ({ ...ref(ErrorBody), description, ...(headers === undefined ? {} : { headers }) })

/** How each error status is documented, once, for every route that can answer it. */
export const errorResponses = {
  malformed: errorResponse('The HTTP request itself is malformed: for example no Host header, headers too large, or a method this path does not support.'),
  400: errorResponse('The request is malformed: the body is not a JSON object or breaks a field rule, or a ' +
    'path or query value is not canonical. The message names the field and the rule.'),
  401: errorResponse('No Bearer token, or one that is malformed, unknown, expired or revoked.', {
    'WWW-Authenticate': { type: 'string', description: 'Bearer realm="plantstore", with error="invalid_token" when a Bearer token was sent' }
  }),
  403: errorResponse('The token is valid but lacks the scope this operation needs; nothing was done.', {
    'WWW-Authenticate': { type: 'string', description: 'Bearer realm="plantstore", error="insufficient_scope", scope="<the scope needed>"' }
  }),
  404: errorResponse('No plant has this id.'),
  409: errorResponse('The id is taken by a plant with another name or tag; nothing changed.'),
  412: errorResponse('If-Match names no ETag the plant has now (or the plant does not exist), or If-None-Match ' +
    'matches it (`*`: the plant exists); nothing changed. Read the plant again for its current ETag.'),
  tokenNotFound: errorResponse('No access token has this id.'),
  tokenNameTaken: errorResponse('A live access token (neither revoked nor expired) already has this name; nothing was created.'),
  webhookNotFound: errorResponse('No webhook subscription has this id.'),
  tokenNotRevocable: errorResponse('The token comes from PLANTSTORE_TOKENS, so it cannot be revoked over HTTP; nothing changed.'),
  414: errorResponse('A path segment is longer than 100 characters (judged after authentication).'),
  429: errorResponse('This token sent more requests than RATE_LIMIT_PER_MINUTE allows (only when that limit is set), ' +
    'or this client address had AUTH_FAILURE_LIMIT_PER_MINUTE failed authentications (401s) within a minute: then ' +
    'every request from it is refused, whatever its token, until the minute has passed.', {
    'Retry-After': { type: 'string', description: 'Seconds until the token or the address may send again' }
  }),
  413: errorResponse('The body is larger than the configured limit (16 KiB by default).'),
  415: errorResponse('The Content-Type is not application/json in UTF-8 (application/merge-patch+json for PATCH), ' +
    'or the body has a Content-Encoding.'),
  500: errorResponse('An unexpected error; the message names the request id to quote to the operator.'),
  503: errorResponse('Storage is unavailable, the service is overloaded, or it is shutting down; nothing was changed by this request.', {
    'Retry-After': { type: 'string', description: 'Seconds to wait before retrying' }
  })
} as const

/** What every authenticated operation can answer with, whatever it does. */
export const authenticatedOperationErrors = {
  400: errorResponses[400],
  401: errorResponses[401],
  403: errorResponses[403],
  429: errorResponses[429],
  500: errorResponses[500],
  503: errorResponses[503]
}

/** What an operation with a path parameter can answer with too. */
export const pathParameterErrors = { 414: errorResponses[414] }

/** What an operation that reads a body can answer with too. */
export const bodyErrors = { 413: errorResponses[413], 415: errorResponses[415] }

/** A 201 whose body holds a secret shown only this once: Location names the new resource, and no cache keeps it. */
export function createdWithSecret<T extends TSchema> (schema: T, description: string, location: string) {
  return {
    ...ref(schema),
    description,
    headers: {
      Location: { type: 'string', description: location },
      'Cache-Control': { type: 'string', description: 'no-store: the body holds a secret' }
    }
  }
}
