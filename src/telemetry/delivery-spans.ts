import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Tracer } from '@opentelemetry/api'
import {
  ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT
} from '@opentelemetry/semantic-conventions'
import type { ClaimedDelivery } from '../store/webhook-store.js'
import type { DeliveryTracer } from '../webhooks/dispatcher.js'
import { hostOf } from '../webhooks/network.js'
import { endFailed } from './store-spans.js'

export const ATTR_WEBHOOK_EVENT_ID = 'plantstore.webhook.event_id'
export const ATTR_WEBHOOK_EVENT_TYPE = 'plantstore.webhook.event_type'
export const ATTR_WEBHOOK_SUBSCRIPTION = 'plantstore.webhook.subscription_id'
export const ATTR_WEBHOOK_ATTEMPT = 'plantstore.webhook.attempt'
export const ATTR_WEBHOOK_RESULT = 'plantstore.webhook.result'

/**
 * A client span per delivery attempt, "webhook delivery", ended with the attempt's result; its context
 * goes to the receiver in `traceparent`. Each attempt is the root of a trace of its own: the outbox
 * does not keep the trace of the write that made the event. The receiver's URL is not recorded (its
 * path or query may hold a credential), only its host and port.
 */
export function deliverySpans (tracer: Tracer): DeliveryTracer {
  return {
    traceAttempt: (delivery, attempt) => {
      const span = tracer.startSpan('webhook delivery', { root: true, kind: SpanKind.CLIENT, attributes: attributesOf(delivery) })
      const attemptContext = trace.setSpan(ROOT_CONTEXT, span)
      const traceHeaders: Record<string, string> = {}
      propagation.inject(attemptContext, traceHeaders)
      return context.with(attemptContext, attempt, undefined, traceHeaders).then(
        (settled) => {
          span.setAttribute(ATTR_WEBHOOK_RESULT, settled.result)
          if (settled.statusCode !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, settled.statusCode)
          if (settled.result !== 'delivered') {
            span.setAttribute(ATTR_ERROR_TYPE, settled.statusCode === undefined ? 'delivery_failed' : String(settled.statusCode))
            span.setStatus({ code: SpanStatusCode.ERROR, ...(settled.error === undefined ? {} : { message: settled.error }) })
          }
          span.end()
          return settled
        },
        (error: unknown) => {
          endFailed(span, error)
          throw error
        })
    }
  }
}

function attributesOf (delivery: ClaimedDelivery): Attributes {
  const attributes: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: 'POST',
    [ATTR_WEBHOOK_EVENT_ID]: delivery.eventId,
    [ATTR_WEBHOOK_EVENT_TYPE]: delivery.type,
    [ATTR_WEBHOOK_SUBSCRIPTION]: delivery.subscriptionId,
    [ATTR_WEBHOOK_ATTEMPT]: delivery.attempts + 1
  }
  if (URL.canParse(delivery.url)) {
    const url = new URL(delivery.url)
    attributes[ATTR_SERVER_ADDRESS] = hostOf(url)
    attributes[ATTR_SERVER_PORT] = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port)
  }
  return attributes
}
