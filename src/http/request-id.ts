import { randomBytes } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export const REQUEST_ID_HEADER = 'x-request-id'
/** Short and printable: safe to echo in a header and a log line. Anything else is replaced. */
const TRUSTED_REQUEST_ID = /^[\x21-\x7e]{1,128}$/

/** Reuses the caller's `x-request-id` when it is short and printable; otherwise makes a new one. */
export function requestIdFor (request: IncomingMessage): string {
  const incoming = request.headers[REQUEST_ID_HEADER]
  return typeof incoming === 'string' && TRUSTED_REQUEST_ID.test(incoming) ? incoming : newRequestId()
}

/**
 * A new request id, unique across processes and restarts: a UUIDv8 (RFC 9562, the layout is ours) of
 * 74 random bits drawn once per process, then a 48-bit counter. It costs a fraction of `randomUUID()`,
 * which draws fresh randomness for every request that an id does not need.
 */
export const newRequestId: () => string = (() => {
  const random = randomBytes(10).toString('hex')
  const prefix = `${random.slice(0, 8)}-${random.slice(8, 12)}-8${random.slice(12, 15)}-` +
    `${(0x8 | (parseInt(random.slice(15, 16), 16) & 0x3)).toString(16)}${random.slice(16, 19)}-`
  let counter = 0
  return () => `${prefix}${(counter++).toString(16).padStart(12, '0')}`
})()

/** Echoes the request id on every reply, first thing, so even early errors carry it. */
export const requestIdHeader = fp(async function requestIdHeader (app: FastifyInstance) {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id)
    done()
  })
}, { name: 'request-id-header' })
