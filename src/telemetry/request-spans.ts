import { context, trace, type Span } from '@opentelemetry/api'
import type { FastifyOtelInstrumentation } from '@fastify/otel'
import { ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_URL_PATH, ATTR_URL_QUERY } from '@opentelemetry/semantic-conventions'
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { withoutSearchText } from '../http/query-string.js'

/**
 * Registers @fastify/otel, whose `onRequest` hook starts the request's span (from the caller's
 * `traceparent`) and whose `onSend` ends it with the status code, and runs every route handler in
 * that span's context. Handlers do not run in it on their own: turn-batched handlers run together
 * from one `setImmediate`, and a body's bytes arrive in the socket's context.
 */
export function requestSpans (instrumentation: FastifyOtelInstrumentation): FastifyPluginAsync {
  return fp(async function requestSpans (app: FastifyInstance) {
    await app.register(instrumentation.plugin())
    app.addHook('onRoute', (route) => {
      const handler = route.handler
      route.handler = function handlerInContext (this: FastifyInstance, request, reply) {
        const requestContext = request.opentelemetry().context
        return requestContext === null ? handler.call(this, request, reply) : context.with(requestContext, handler, this, request, reply)
      }
    })
  }, { name: 'request-spans' })
}

/**
 * @fastify/otel's `requestHook`: names the span "METHOD /route/:template" (the method alone when no
 * route matched) and keeps the query string out of `url.path`, and a search's text out of `url.query`.
 */
export function nameRequestSpan (span: Span, request: FastifyRequest): void {
  const route = request.routeOptions.url
  span.updateName(route === undefined ? request.method : `${request.method} ${route}`)
  const queryStart = request.url.indexOf('?')
  if (queryStart !== -1) {
    span.setAttribute(ATTR_URL_PATH, request.url.slice(0, queryStart))
    span.setAttribute(ATTR_URL_QUERY, withoutSearchText(request.url.slice(queryStart)).slice(1))
  }
}

/**
 * Ends the span of a request whose answer was hijacked (a change stream), when that answer closes:
 * @fastify/otel ends a span in `onSend`, which a hijacked answer never reaches.
 */
export function endHijackedRequestSpan (request: FastifyRequest, statusCode: number): void {
  const { span } = request.opentelemetry()
  if (span === null || span === undefined) return
  span.setAttributes({ [ATTR_HTTP_RESPONSE_STATUS_CODE]: statusCode })
  span.end()
}

/** The ids of a request's span, for its log line. */
export interface TraceIds {
  readonly traceId: string
  readonly spanId: string
}

export function requestTraceIds (request: FastifyRequest): TraceIds | undefined {
  const requestContext = request.opentelemetry().context
  const spanContext = requestContext === null ? undefined : trace.getSpanContext(requestContext)
  return spanContext === undefined ? undefined : { traceId: spanContext.traceId, spanId: spanContext.spanId }
}

/** pino's `mixin`: a new object each time, since pino merges the line's fields into it. */
export function activeTraceIds (): object {
  const spanContext = trace.getSpanContext(context.active())
  return spanContext === undefined ? {} : { trace_id: spanContext.traceId, span_id: spanContext.spanId }
}
