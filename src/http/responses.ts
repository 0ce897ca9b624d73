import type { TSchema } from '@sinclair/typebox'
import { ErrorBody } from '../schemas/error-body.js'
import { ref } from '../schemas/kinds.js'

type ResponseHeaders = Record<string, { type: 'string', description: string }>

/**
 * An error response: the shared `Error` schema with this status's own example (Swagger UI shows it in
 * place of the schema's), so that each example's `error` equals its status.
 */
const errorResponse = (status: number, description: string, exampleMessage: string, headers?: ResponseHeaders) => ({
  description,
  ...(headers === undefined ? {} : { headers }),
  content: { 'application/json': { schema: ref(ErrorBody), example: { error: status, message: exampleMessage } } }
})

const RETRY_AFTER = { 'Retry-After': { type: 'string', description: 'Seconds to wait before retrying' } } as const

/** How each error status is documented, once, for every route that can answer it. */
export const errorResponses = {
  malformed: errorResponse(400, 'The HTTP request itself is malformed: for example no Host header, headers too large, or a method this path does not support.',
    'the HTTP request is malformed'),
  400: errorResponse(400, 'The request is malformed: the body is not a JSON object or breaks a field rule, or a ' +
    'path or query value is not canonical. The message names the field and the rule.', 'name must be at most 256 characters long'),
  401: errorResponse(401, 'No Bearer token, or one that is malformed, unknown, expired or revoked.',
    'the bearer token is missing, malformed or not accepted', {
      'WWW-Authenticate': { type: 'string', description: 'Bearer realm="plantstore", with error="invalid_token" when a Bearer token was sent' }
    }),
  403: errorResponse(403, 'The token is valid but lacks the scope this operation needs; nothing was done.',
    'this token lacks the scope "plants:write", which this operation needs', {
      'WWW-Authenticate': {
        type: 'string',
        description: 'Bearer realm="plantstore", error="insufficient_scope", scope="…", the scope being the one this operation needs (for example scope="plants:write")'
      }
    }),
  404: errorResponse(404, 'No plant has this id.', 'no plant has id 10'),
  409: errorResponse(409, 'The id is taken by a plant with another name or tag; nothing changed.', 'plant 10 already exists with a different name or tag'),
  412: errorResponse(412, 'If-Match names no ETag the plant has now (or the plant does not exist), or If-None-Match ' +
    'matches it (`*`: the plant exists); nothing changed. Read the plant again for its current ETag.',
  'plant 10 is not in the state the request\'s If-Match or If-None-Match expects; read it again for its current ETag'),
  changesExpired: errorResponse(410, 'Some change after this resume point is no longer kept (CHANGES_RETENTION): read the plants ' +
    'again (the head, then the plants, then the changes after that head).',
  'changes after seq 1041 are no longer kept (CHANGES_RETENTION): read the plants again (GET /plants/changes/head, then the plants, then the changes after that head)'),
  streamsFull: errorResponse(503, 'Storage is unavailable, the service is overloaded or shutting down, or (a live stream) this instance ' +
    'has CHANGES_STREAMS_MAX streams open.', 'this instance has 1000 change streams open, its most (CHANGES_STREAMS_MAX); retry later or poll GET /plants/changes',
  RETRY_AFTER),
  tokenNotFound: errorResponse(404, 'No access token has this id.', 'no access token has id "0b5c7e58-9a55-4bd0-a8b8-3f4f8d0e2a61"'),
  tokenNameTaken: errorResponse(409, 'A live access token (neither revoked nor expired) already has this name; nothing was created.',
    'a live access token is already named "grafana"; revoke it or choose another name'),
  webhookNotFound: errorResponse(404, 'No webhook subscription has this id.', 'no webhook subscription has id "5b7e0c1e-3f0a-4c1e-9d2b-6a8f1e0c4d37"'),
  tokenNotRevocable: errorResponse(409, 'The token comes from PLANTSTORE_TOKENS, so it cannot be revoked over HTTP; nothing changed.',
    'the access token "ci" comes from the environment and cannot be revoked over HTTP: remove it from the token file and send SIGHUP, ' +
    'or from PLANTSTORE_TOKENS and restart'),
  414: errorResponse(414, 'A path segment is longer than 100 characters (judged after authentication).', 'a path segment of the request URL is too long'),
  429: errorResponse(429, 'This token sent more requests than RATE_LIMIT_PER_MINUTE allows (only when that limit is set), ' +
    'or this client address had AUTH_FAILURE_LIMIT_PER_MINUTE failed authentications (401s) within a minute: then ' +
    'every request from it is refused, whatever its token, until the minute has passed.', 'too many requests for this token, retry in 12 s', {
    'Retry-After': { type: 'string', description: 'Seconds until the token or the address may send again' }
  }),
  413: errorResponse(413, 'The body is larger than the configured limit (16 KiB by default).', 'request body is larger than 16384 bytes'),
  415: errorResponse(415, 'The Content-Type is not application/json in UTF-8 (application/merge-patch+json for PATCH), ' +
    'or the body has a Content-Encoding.', 'application/json bodies must be UTF-8'),
  500: errorResponse(500, 'An unexpected error; the message names the request id to quote to the operator.',
    'internal error; quote request id 3f1c2b7a-1d4e-4f5a-9b6c-7d8e9f0a1b2c to the operator'),
  503: errorResponse(503, 'Storage is unavailable, the service is overloaded, or it is shutting down; nothing was changed by this request.',
    'storage is unavailable, retry later; request id 3f1c2b7a-1d4e-4f5a-9b6c-7d8e9f0a1b2c', RETRY_AFTER)
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
