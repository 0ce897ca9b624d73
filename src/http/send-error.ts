import type { FastifyReply } from 'fastify'
import type { PlantstoreError } from '../errors.js'
import { REQUEST_ID_HEADER } from './request-id.js'

/** Writes the `Error` body `{error, message}` with the error's status and headers, and the request id. */
export function sendError (reply: FastifyReply, error: PlantstoreError): FastifyReply {
  return reply
    .code(error.statusCode)
    .headers(error.headers)
    .header(REQUEST_ID_HEADER, reply.request.id)
    .type('application/json; charset=utf-8')
    .send({ error: error.statusCode, message: error.message })
}
