import fastifyCors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { PlantstoreError, routeNotFound } from '../errors.js'
import { pathOf } from './query-string.js'
import { REQUEST_ID_HEADER } from './request-id.js'
import { sendError } from './send-error.js'

export interface CorsOptions {
  /** `'*'`, or the exact origins (scheme, host and port) whose pages may call the API. */
  readonly origins: '*' | readonly string[]
}

/** Every method the API has: a method a path lacks is then a 405 the script can read, not a failed preflight. */
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE'
/** The token, JSON bodies, conditional reads and writes, the caller's own request id, and its trace context (W3C). */
const ALLOWED_HEADERS = 'Authorization, Content-Type, If-Match, If-None-Match, Prefer, Last-Event-ID, x-request-id, traceparent, tracestate'
/** What scripts may read beyond the headers every response shows them (Content-Type, Cache-Control, …). */
const EXPOSED_HEADERS = 'Link, Location, ETag, Retry-After, X-Total-Count, Preference-Applied, x-request-id'
/** Chromium keeps a preflight's answer (for one origin and URL) at most this long; Firefox a day. */
const PREFLIGHT_MAX_AGE_SECONDS = '7200'

export const corsOriginRefused = (origin: string) =>
  new PlantstoreError(403, `the origin ${JSON.stringify(origin)} may not call this API from a browser: it is not in CORS_ORIGINS`)

/**
 * CORS for browser pages on other origins, on every route of the app. Registered first, so its headers
 * are on every answer, the refusals of every later hook (503 of shedding or shutdown, 401, 404, 405, 415)
 * included, and a script can read their `Error` body.
 *
 * @fastify/cors sets `Access-Control-Allow-Origin`, `Vary: Origin` (when the answer depends on the origin)
 * and `Access-Control-Expose-Headers`. Preflights are answered here, before any scope's authentication
 * (a browser sends them without the token): 204 for an allowed origin and a known path, 403 for another
 * origin, 404 for an unknown path, each refusal an `Error` body. A plain `OPTIONS` (no
 * `Access-Control-Request-Method`) is no preflight: it gets its 405 with `Allow`, or 404, as without CORS.
 */
export const cors = fp(async function cors (app: FastifyInstance, options: CorsOptions) {
  // @fastify/cors routes `OPTIONS *` so that the router takes preflights. Here every request reaches
  // hooks (a route's, or a scope's not-found handler's), so preflights need no route; and that one would
  // take plain OPTIONS requests from the not-found handlers. The route is added with no method: the router
  // gets nothing. (This plugin comes before `knownRoutes`, which so never sees it and keeps `Allow` right.)
  app.addHook('onRoute', (route) => {
    if (route.url === '*' && route.method === 'OPTIONS') route.method = []
  })
  await app.register(fastifyCors, {
    origin: options.origins === '*' ? '*' : [...options.origins],
    exposedHeaders: EXPOSED_HEADERS,
    preflight: false
  })

  const allowsEveryOrigin = options.origins === '*'
  const allowedOrigins = new Set(allowsEveryOrigin ? [] : options.origins)
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method !== 'OPTIONS') return done()
    const origin = request.headers.origin
    if (origin === undefined || request.headers['access-control-request-method'] === undefined) return done()
    if (!allowsEveryOrigin && !allowedOrigins.has(origin)) {
      sendError(reply, corsOriginRefused(origin))
      return
    }
    const path = pathOf(request.url)
    if (request.server.knownRoutes.allowedMethods(path) === undefined) {
      sendError(reply, routeNotFound(request.method, path))
      return
    }
    reply.code(204).headers({
      'access-control-allow-methods': ALLOWED_METHODS,
      'access-control-allow-headers': ALLOWED_HEADERS,
      'access-control-max-age': PREFLIGHT_MAX_AGE_SECONDS,
      [REQUEST_ID_HEADER]: request.id
    }).send()
  })
}, { name: 'cors' })
