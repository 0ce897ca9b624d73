import { isUtf8 } from 'node:buffer'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { invalidJson, invalidRequest, unsupportedMediaType } from '../errors.js'
import { JsonSyntaxError, parseExactJson } from '../exact-json.js'

const CHARSET_PARAMETER = /;\s*charset\s*=\s*"?([^";\s]*)/i

export const JSON_MEDIA_TYPE = 'application/json'
/** RFC 7396 JSON merge patch: the only body `PATCH` takes. */
export const MERGE_PATCH_MEDIA_TYPE = 'application/merge-patch+json'
type BodyMediaType = typeof JSON_MEDIA_TYPE | typeof MERGE_PATCH_MEDIA_TYPE

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The one media type the route's body may have, for the messages of the 415s; `application/json` when not set. */
    bodyMediaType?: BodyMediaType
  }
}

/**
 * The only body parser: JSON in UTF-8 without any Content-Encoding, parsed with exact integers, as
 * `application/json`. Every other media type (Fastify's built-in `text/plain` parser included) is
 * removed, so it answers 415, not 400. A scope whose routes take another JSON media type swaps the
 * parser with `acceptJsonBodiesAs` (PATCH takes only `application/merge-patch+json`).
 */
export const jsonBody = fp(async function jsonBody (app: FastifyInstance) {
  // Before the body is read (and after authentication, which is `onRequest`).
  app.addHook('preParsing', (request, _reply, payload, done) => {
    if (request.headers['content-encoding'] !== undefined) {
      const mediaType = request.routeOptions.config.bodyMediaType ?? JSON_MEDIA_TYPE
      done(unsupportedMediaType(`request bodies must not be content-encoded; send plain ${mediaType}`))
      return
    }
    done(null, payload)
  })
  acceptJsonBodiesAs(app, JSON_MEDIA_TYPE)
}, { name: 'json-body' })

/**
 * Makes `mediaType` the only one the scope's routes accept a body in, parsed as JSON; its routes name
 * it in `config.bodyMediaType` for the 415 that other types get.
 */
export function acceptJsonBodiesAs (app: FastifyInstance, mediaType: BodyMediaType): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(mediaType, { parseAs: 'buffer' }, (request, body, done) => {
    try {
      done(null, parseJsonBody(request, body as Buffer, mediaType))
    } catch (error) {
      done(error as Error, undefined)
    }
  })
}

function parseJsonBody (request: FastifyRequest, body: Buffer, mediaType: BodyMediaType): unknown {
  const charset = CHARSET_PARAMETER.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase()
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw unsupportedMediaType(`${mediaType} bodies must be UTF-8`)
  }
  // A leading byte order mark is ignored, as RFC 8259 §8.1 lets a parser do.
  const text = body.toString('utf8', hasByteOrderMark(body) ? 3 : 0)
  // Decoding replaces each invalid sequence with U+FFFD, so only a text holding one needs the check
  // (and an ASCII text, stored one byte per character, answers `includes` without looking).
  if (text.includes('\uFFFD') && !isUtf8(body)) throw invalidRequest('request body is not valid UTF-8')
  if (text.trim() === '') throw invalidRequest(`request body is empty; send a JSON object as ${mediaType}`)
  try {
    return parseExactJson(text)
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw invalidJson(error.message)
    throw invalidJson('syntax error')
  }
}

function hasByteOrderMark (body: Buffer): boolean {
  return body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf
}
