import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'

/** Log paths that must never be written, whatever a future serializer adds. */
export const logRedaction = {
  paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'authorization'],
  censor: '[redacted]'
}

/**
 * One log line per completed request (method, path, status, time) instead of Fastify's two, which
 * measurably cost throughput. Request headers are never logged; errors of 5xx replies are logged with
 * their stack by the error envelope.
 */
export class CompletedRequestLog extends LogController {
  override incomingRequest (): void {}

  override requestCompleted (_error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    reply.log.info({
      method: request.method,
      url: request.url,
      statusCode: reply.statusCode,
      responseTime: reply.elapsedTime
    }, 'request completed')
  }

  override routeNotFound (): void {}
}
