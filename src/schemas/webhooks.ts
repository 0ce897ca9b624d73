import { Kind, Type, TypeRegistry, type Static } from '@sinclair/typebox'
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../store/webhook-store.js'
import { component, DateTime, PageCursor, PageLimit, ref, UUID } from './kinds.js'

TypeRegistry.Set('WebhookEvent', (_schema, value) => typeof value === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value))
TypeRegistry.Set('WebhookId', (_schema, value) => typeof value === 'string' && UUID.test(value))

const WebhookEvent = Type.Unsafe<WebhookEventType>({ [Kind]: 'WebhookEvent', type: 'string', enum: [...WEBHOOK_EVENT_TYPES] })

export const MAX_WEBHOOK_URL_LENGTH = 2048

const webhookFields = {
  id: Type.String({ format: 'uuid', description: 'The subscription\'s id', examples: ['5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'] }),
  url: Type.String({ format: 'uri', description: 'Where events are posted', examples: ['https://example.com/hooks/plantstore'] }),
  events: Type.Array(WebhookEvent, { minItems: 1, uniqueItems: true, description: 'The events sent to it', examples: [['plant.created']] }),
  createdAt: DateTime('When the subscription was made, RFC 3339 UTC'),
  disabledAt: Type.Optional(DateTime('When the receiver answered 410 Gone, which disabled the subscription; absent while it is enabled')),
  disabledReason: Type.Optional(Type.String({ description: 'Why the subscription is disabled', examples: ['the receiver answered 410 Gone'] }))
}

export const NewWebhookSubscription = Type.Object({
  url: Type.String({
    minLength: 1,
    maxLength: MAX_WEBHOOK_URL_LENGTH,
    format: 'uri',
    description: 'An http or https URL. Loopback, private and link-local addresses are refused unless the service runs ' +
      'with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true; the address is checked again at every delivery.',
    examples: ['https://example.com/hooks/plantstore']
  }),
  events: Type.Optional(Type.Array(WebhookEvent, {
    minItems: 1,
    uniqueItems: true,
    description: 'A non-empty set of plant.created, plant.updated and plant.deleted; all three when absent',
    examples: [['plant.created']]
  }))
}, component('NewWebhookSubscription', 'A webhook subscription to make. Unknown properties are accepted and ignored.'))
export type NewWebhookSubscription = Static<typeof NewWebhookSubscription>

export const WebhookSubscription = Type.Object(webhookFields, component('WebhookSubscription', 'A webhook subscription, without its signing secret.'))

export const CreatedWebhookSubscription = Type.Object({
  ...webhookFields,
  secret: Type.String({
    pattern: '^whsec_[A-Za-z0-9+/]+={0,2}$',
    description: 'The signing secret, in the Standard Webhooks form `whsec_<base64>`. This response is the only time it is shown.',
    examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw1u3E4ERhSGs=']
  })
}, component('CreatedWebhookSubscription', 'A subscription just made, with its signing secret.'))

export const WebhookSubscriptionStatus = Type.Object({
  ...webhookFields,
  pending: Type.Integer({ minimum: 0, description: 'Events waiting for delivery, retries included' }),
  delivered: Type.Integer({ minimum: 0, description: 'Events delivered (a 2xx answer)' }),
  failed: Type.Integer({ minimum: 0, description: 'Events given up on after 24 h of retries, or dropped when the subscription was disabled' }),
  lastError: Type.Optional(Type.Object({
    at: DateTime('When the attempt failed, RFC 3339 UTC'),
    message: Type.String({ description: 'The status code (`HTTP 500`) or the error of the attempt', examples: ['HTTP 503'] })
  }, { description: 'The most recent failed attempt; absent if none failed' })),
  previousSecretExpiresAt: Type.Optional(DateTime('While a secret rotation\'s grace period lasts: until when deliveries also carry ' +
    'the signature of the previous secret, RFC 3339 UTC; absent otherwise'))
}, component('WebhookSubscriptionStatus', 'A subscription with its delivery counts.'))

export const WebhookSubscriptionList = Type.Array(ref(WebhookSubscription), { description: 'Every subscription, newest first.' })

export const DeliveryAttempt = Type.Object({
  id: Type.String({ pattern: '^[0-9]+$', description: 'The attempt\'s id, for `after`', examples: ['17'] }),
  eventId: Type.String({ description: 'The event\'s `webhook-id`, the same on every attempt of the event', examples: ['msg_6f1c0e2b9a8d4c3b8e7f6a5b4c3d2e1f'] }),
  type: WebhookEvent,
  attempt: Type.Integer({ minimum: 1, description: '1 for the first attempt of the event, 2 for its first retry, …' }),
  statusCode: Type.Optional(Type.Integer({ description: 'The receiver\'s status code; absent when no answer came', examples: [200] })),
  error: Type.Optional(Type.String({
    description: 'Why there was no answer, or why it did not count (no answer or a status later than 10 s, connection refused, …)',
    examples: ['no answer within 10 s']
  })),
  at: DateTime('When the attempt was made, RFC 3339 UTC')
}, component('DeliveryAttempt', 'One attempt to deliver one event.'))

export const DeliveryAttemptPage = Type.Array(ref(DeliveryAttempt), {
  description: 'Attempts newest first. A `Link: <…>; rel="next"` header names the page of older ones while there are more.'
})

export const WebhookIdParams = Type.Object({
  id: Type.Unsafe<string>({ [Kind]: 'WebhookId', type: 'string', format: 'uuid', description: 'The id of the subscription', examples: ['5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'] })
})
export type WebhookIdParams = Static<typeof WebhookIdParams>

export const DeliveryAttemptQuery = Type.Object({
  limit: PageLimit('attempts'),
  after: PageCursor('the page starts with the newest attempt whose id is smaller', 17)
})
export type DeliveryAttemptQuery = Static<typeof DeliveryAttemptQuery>

/** How long a rotated secret's predecessor stays in use at most: 7 days. */
export const MAX_PREVIOUS_SECRET_SECONDS = 7 * 24 * 3600
/** The grace period of a rotation that names none: 24 hours. */
export const DEFAULT_PREVIOUS_SECRET_SECONDS = 24 * 3600

export const WebhookSecretRotation = Type.Object({
  expiresInSeconds: Type.Optional(Type.Integer({
    minimum: 0,
    maximum: MAX_PREVIOUS_SECRET_SECONDS,
    description: 'How long deliveries stay signed with the previous secret too, in seconds: 86400 (24 h) when absent, 0 for ' +
      'not at all, at most 604800 (7 days)',
    examples: [3600]
  }))
}, component('WebhookSecretRotation', 'A signing secret rotation; the body may be left out. Unknown properties are accepted and ignored.'))
export type WebhookSecretRotation = Static<typeof WebhookSecretRotation>

export const RotatedWebhookSecret = Type.Object({
  id: webhookFields.id,
  secret: CreatedWebhookSubscription.properties.secret,
  previousSecretExpiresAt: DateTime('Until when deliveries also carry the signature of the previous secret, RFC 3339 UTC ' +
    '(the time of the rotation when `expiresInSeconds` was 0)')
}, component('RotatedWebhookSecret', 'The new signing secret of a subscription, shown only now.'))
