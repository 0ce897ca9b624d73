import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { invalidJson, invalidRequest, unsupportedMediaType } from '../errors.js'
import { JsonSyntaxError, parseExactJson } from './exact-json.js'

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })
const CHARSET_PARAMETER = /;\s*charset\s*=\s*"?([^";\s]*)/i

/**
 * The only body parser: `application/json` in UTF-8 without any Content-Encoding, parsed with exact
 * integers. Every other media type (Fastify's built-in `text/plain` parser included) is removed, so
 * it answers 415, not 400.
 */
export const jsonBody = fp(async function jsonBody (app: FastifyInstance) {
  // Before the body is read (and after authentication, which is `onRequest`).
  app.addHook('preParsing', (request, _reply, payload, done) => {
    if (request.headers['content-encoding'] !== undefined) {
      done(unsupportedMediaType('request bodies must not be content-encoded; send plain application/json'))
      return
    }
    done(null, payload)
  })
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    try {
      done(null, parseJsonBody(request, body as Buffer))
    } catch (error) {
      done(error as Error, undefined)
    }
  })
}, { name: 'json-body' })

function parseJsonBody (request: FastifyRequest, body: Buffer): unknown {
  const charset = CHARSET_PARAMETER.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase()
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw unsupportedMediaType('application/json bodies must be UTF-8')
  }
  let text: string
  try {
    text = utf8.decode(body)
  } catch {
    throw invalidRequest('request body is not valid UTF-8')
  }
  try {
    return parseExactJson(text)
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw invalidJson(error.message)
    throw invalidJson('syntax error')
  }
}
