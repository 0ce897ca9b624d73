import type { IncomingMessage } from 'node:http'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { malformedUrl, uriTooLong, type PlantstoreError } from '../errors.js'
import { sendError } from './send-error.js'

/** The longest path segment served (the router's own limit of old); a longer one is a 414 after authentication. */
export const MAX_PATH_SEGMENT_LENGTH = 100
/** Given to the router so that it routes any segment the HTTP parser lets through, to be judged after authentication. */
export const ROUTER_MAX_PARAM_LENGTH = 65_536

/** Requests whose target's path could not be percent-decoded: routed with the bad sequences escaped, answered 400. */
const undecodable = new WeakSet<IncomingMessage>()

/**
 * Fastify's `rewriteUrl`. The router answers a path it cannot decode itself, before any hook, so that
 * an unauthenticated `/plants/%zz` would get a 400 instead of its 401. Here such a path has its bad
 * percent-sequences escaped (`%zz` → `%25zz`) so that it reaches the route or scope it names, whose
 * hooks authenticate it first; `targetRefusal` then answers the 400. Every other URL is left as sent.
 */
export function routableUrl (request: IncomingMessage): string {
  const url = request.url ?? '/'
  const pathEnd = pathEndOf(url)
  const percentAt = url.indexOf('%')
  if (percentAt === -1 || percentAt > pathEnd) return url
  const path = url.slice(0, pathEnd)
  if (decodes(path)) return url
  undecodable.add(request)
  return escapeBadSequences(path) + url.slice(pathEnd)
}

/**
 * What a request whose credentials were accepted gets instead of being served, for its target alone:
 * 400 when its path cannot be decoded, 414 when a path segment is longer than MAX_PATH_SEGMENT_LENGTH.
 */
export function targetRefusal (request: FastifyRequest): PlantstoreError | undefined {
  if (undecodable.has(request.raw)) return malformedUrl()
  const url = request.url
  if (url.length <= MAX_PATH_SEGMENT_LENGTH + 1) return undefined
  return hasOverlongSegment(url.slice(0, pathEndOf(url))) ? uriTooLong() : undefined
}

/**
 * For the routes no token guards (liveness, the documents, unknown paths): the 400 of an undecodable
 * path, in `preParsing`, which runs after every scope's `onRequest`, so after authentication where
 * there is any.
 */
export const requestTargets = fp(async function requestTargets (app: FastifyInstance) {
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (undecodable.has(request.raw)) {
      sendError(reply, malformedUrl())
      return
    }
    done(null, payload)
  })
}, { name: 'request-targets' })

function pathEndOf (url: string): number {
  for (let index = 0; index < url.length; index++) {
    const code = url.charCodeAt(index)
    if (code === 0x3f || code === 0x23) return index
  }
  return url.length
}

function decodes (text: string): boolean {
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

function hasOverlongSegment (path: string): boolean {
  let segmentStart = 0
  for (;;) {
    const slash = path.indexOf('/', segmentStart)
    const segmentEnd = slash === -1 ? path.length : slash
    if (segmentEnd - segmentStart > MAX_PATH_SEGMENT_LENGTH) return true
    if (slash === -1) return false
    segmentStart = slash + 1
  }
}

/**
 * Escapes the `%` of every sequence that does not decode: a `%` without two hex digits, and each run
 * of `%XX` sequences that is not UTF-8. What decodes is kept, so `/%61dmin/%zz` still names `/admin`.
 */
function escapeBadSequences (path: string): string {
  return path.replace(/(?:%[0-9A-Fa-f]{2})+|%/g, (run) => run.length > 1 && decodes(run) ? run : run.replaceAll('%', '%25'))
}
