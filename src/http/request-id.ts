import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export const REQUEST_ID_HEADER = 'x-request-id'
/** Short and printable: safe to echo in a header and a log line. Anything else is replaced. */
const TRUSTED_REQUEST_ID = /^[\x21-\x7e]{1,128}$/

/** Reuses the caller's `x-request-id` when it is short and printable; otherwise makes a new one. */
export function requestIdFor (request: IncomingMessage): string {
  const incoming = request.headers[REQUEST_ID_HEADER]
  return typeof incoming === 'string' && TRUSTED_REQUEST_ID.test(incoming) ? incoming : randomUUID()
}

/** Echoes the request id on every reply, first thing, so even early errors carry it. */
export const requestIdHeader = fp(async function requestIdHeader (app: FastifyInstance) {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id)
    done()
  })
}, { name: 'request-id-header' })
