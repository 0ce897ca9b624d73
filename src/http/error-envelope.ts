import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import {
  bodyTooLarge, duplicateHost, headersTooLarge, internalError, malformedHttp, malformedUrl, missingHost, PlantstoreError, requestTimeout,
  storeUnavailable, unsupportedMediaType
} from '../errors.js'
import { StoreUnavailableError } from '../store/plant-store.js'
import { JSON_MEDIA_TYPE } from './json-body.js'
import { closeAfterEarlyAnswer, closeAfterRefusal } from './lingering-close.js'
import { answerUnmatched } from './method-not-allowed.js'
import { newRequestId, REQUEST_ID_HEADER } from './request-id.js'
import { sendError } from './send-error.js'

/**
 * Turns every failure, from every layer, into the `Error` body `{error, message}` with `error` equal
 * to the status and the request id in `x-request-id`. 5xx messages never carry internals: the error
 * itself is logged under the request id the message names.
 */
export const errorEnvelope = fp(async function errorEnvelope (app: FastifyInstance) {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const envelope = toPlantstoreError(error, request)
    // A deliberate 503 (overload, shutdown) is not a fault; the request's log line records it.
    if (envelope.statusCode >= 500 && !(error instanceof PlantstoreError)) {
      request.log.error({ err: error }, envelope.message)
    }
    sendError(reply, envelope)
  })

  app.setNotFoundHandler(answerUnmatched)

  // Node lets HTTP/1.1 requests without Host through only because `requireHostHeader` is off, so that
  // this answer, not Node's bare 400, is what the client gets.
  // Node keeps the first of several Host headers; RFC 9112 §3.2 asks for a 400.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      sendError(reply, missingHost())
      return
    }
    if (hasSeveralHostHeaders(request.raw.rawHeaders)) {
      sendError(reply, duplicateHost())
      return
    }
    done()
  })
}, { name: 'error-envelope' })

function toPlantstoreError (error: FastifyError, request: FastifyRequest): PlantstoreError {
  if (error instanceof PlantstoreError) return error
  if (error instanceof StoreUnavailableError) return storeUnavailable(request.id)
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return bodyTooLarge(request.routeOptions.bodyLimit)
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return unsupportedMediaType(`Content-Type must be ${request.routeOptions.config.bodyMediaType ?? JSON_MEDIA_TYPE}`)
  }
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) return new PlantstoreError(status, error.message)
  return internalError(request.id)
}

function hasSeveralHostHeaders (rawHeaders: readonly string[]): boolean {
  let hosts = 0
  for (let index = 0; index < rawHeaders.length; index += 2) {
    const name = rawHeaders[index] as string
    if (name.length === 4 && name.toLowerCase() === 'host' && ++hosts > 1) return true
  }
  return false
}

/**
 * Fastify's `frameworkErrors`: the router refused the URL. Paths it cannot decode are made routable
 * first (request-targets.ts), so that authentication comes first, and no segment is too long for it,
 * so what is left is a target that is not a path at all (`*`, a malformed absolute URL). No hook has
 * run, so this is the only place that can answer it.
 */
export function frameworkError (_error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  closeAfterEarlyAnswer(request.raw, reply.raw)
  sendError(reply, malformedUrl())
}

/**
 * Node's `clientError`: the HTTP parser refused the request before Fastify saw it (malformed request
 * line, oversized headers, a request that took too long). Answers on the raw socket, then closes it.
 */
export function clientError (error: Error & { code?: string }, socket: Socket): void {
  // (Ended: this connection's refusal is already written; the parser reports each later chunk again.)
  if (error.code === 'ECONNRESET' || socket.destroyed || socket.writableEnded) return
  const envelope = error.code === 'HPE_HEADER_OVERFLOW'
    ? headersTooLarge()
    : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? requestTimeout() : malformedHttp()
  if (socket.writable) {
    const body = JSON.stringify({ error: envelope.statusCode, message: envelope.message })
    socket.write(
      `HTTP/1.1 ${envelope.statusCode} ${STATUS_CODES[envelope.statusCode] ?? ''}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `${REQUEST_ID_HEADER}: ${newRequestId()}\r\n` +
      'Connection: close\r\n\r\n' +
      body
    )
  }
  // A client still sending (an oversized header block, say) reads this answer rather than a reset.
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') socket.destroy()
  else closeAfterRefusal(socket)
}
