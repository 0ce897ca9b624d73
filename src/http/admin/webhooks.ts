import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { invalidRequest, webhookNotFound } from '../../errors.js'
import { DEFAULT_PAGE_SIZE, ref } from '../../schemas/kinds.js'
import {
  CreatedWebhookSubscription, DEFAULT_PREVIOUS_SECRET_SECONDS, DeliveryAttemptPage, DeliveryAttemptQuery, NewWebhookSubscription, RotatedWebhookSecret,
  WebhookIdParams, WebhookSecretRotation, WebhookSubscriptionList, WebhookSubscriptionStatus
} from '../../schemas/webhooks.js'
import {
  WEBHOOK_EVENT_TYPES, type DeliveryAttemptRecord, type WebhookStore, type WebhookSubscriptionRecord, type WebhookSubscriptionStatusRecord
} from '../../store/webhook-store.js'
import { webhookUrlRefusal } from '../../webhooks/network.js'
import { newSigningSecret, type SecretBox } from '../../webhooks/secrets.js'
import { bearerSecurity } from '../docs.js'
import { authenticatedOperationErrors, pathParameterErrors, bodyErrors, createdWithSecret, errorResponses } from '../responses.js'

export interface WebhookRoutesOptions {
  readonly webhooks: WebhookStore
  readonly secrets: SecretBox
  readonly allowPrivateNetworks: boolean
}

const ADMIN_SECURITY = bearerSecurity('admin')

/** `/admin/webhooks`: subscriptions and their delivery attempts (docs/reference/api/webhooks.md). */
export async function webhookRoutes (app: FastifyInstance, options: WebhookRoutesOptions): Promise<void> {
  const { webhooks, secrets, allowPrivateNetworks } = options
  const routes = app.withTypeProvider<TypeBoxTypeProvider>()

  routes.post('', {
    schema: {
      operationId: 'createWebhookSubscription',
      summary: 'Subscribe a URL to plant events',
      description: 'From the commit of this request on, every write that changes a plant records an event for this ' +
        'subscription in its own transaction, and the service posts it to the URL, signed per the Standard Webhooks ' +
        'specification with the secret in the answer (shown only now). See `webhooks` in this document for the bodies.',
      tags: ['webhooks'],
      security: ADMIN_SECURITY,
      body: ref(NewWebhookSubscription),
      response: {
        201: createdWithSecret(CreatedWebhookSubscription, 'The subscription is made', 'The path of the subscription: /admin/webhooks/{id}'),
        ...authenticatedOperationErrors,
        ...bodyErrors
      }
    }
  }, async (request, reply) => {
    const { url, events = WEBHOOK_EVENT_TYPES } = request.body
    const refusal = await webhookUrlRefusal(url, allowPrivateNetworks)
    if (refusal !== undefined) throw invalidRequest(refusal)
    const id = randomUUID()
    const secret = newSigningSecret()
    const subscription: WebhookSubscriptionRecord = { id, url, events: [...events], createdAt: Date.now() }
    await webhooks.createSubscription({ ...subscription, storedSecret: secrets.seal(secret, id) })
    request.log.info({ webhook: { id, url: withoutCredentials(url), events: subscription.events } }, 'webhook subscription created')
    return reply.code(201)
      .header('location', `/admin/webhooks/${id}`)
      .header('cache-control', 'no-store')
      .send({ ...subscriptionDocument(subscription), secret })
  })

  routes.get('', {
    schema: {
      operationId: 'listWebhookSubscriptions',
      summary: 'List webhook subscriptions',
      description: 'Every subscription, enabled and disabled, newest first, without the secrets.',
      tags: ['webhooks'],
      security: ADMIN_SECURITY,
      response: {
        200: { ...WebhookSubscriptionList, description: 'The subscriptions' },
        ...authenticatedOperationErrors
      }
    }
  }, async (_request, reply) => {
    return reply.send((await webhooks.listSubscriptions()).map(subscriptionDocument))
  })

  routes.get('/:id', {
    schema: {
      operationId: 'getWebhookSubscription',
      summary: 'Read a webhook subscription',
      description: 'The subscription with its delivery counts and its last failed attempt.',
      tags: ['webhooks'],
      security: ADMIN_SECURITY,
      params: WebhookIdParams,
      response: {
        200: { ...ref(WebhookSubscriptionStatus), description: 'The subscription' },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        404: errorResponses.webhookNotFound
      }
    }
  }, async (request, reply) => {
    const subscription = await webhooks.getSubscription(request.params.id)
    if (subscription === undefined) throw webhookNotFound(request.params.id)
    return reply.send(statusDocument(subscription))
  })

  routes.delete('/:id', {
    schema: {
      operationId: 'deleteWebhookSubscription',
      summary: 'Delete a webhook subscription',
      description: 'Stops recording events for it and drops the ones not delivered yet, with its attempts. A ' +
        'delivery under way may still arrive.',
      tags: ['webhooks'],
      security: ADMIN_SECURITY,
      params: WebhookIdParams,
      response: {
        204: { type: 'null', description: 'The subscription is deleted' },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        404: errorResponses.webhookNotFound,
        ...bodyErrors
      }
    }
  }, async (request, reply) => {
    if (!await webhooks.deleteSubscription(request.params.id)) throw webhookNotFound(request.params.id)
    request.log.info({ webhook: { id: request.params.id } }, 'webhook subscription deleted')
    return reply.code(204).send()
  })

  routes.post('/:id/rotate-secret', {
    schema: {
      operationId: 'rotateWebhookSecret',
      summary: 'Give a webhook subscription a new signing secret',
      description: 'Replaces the signing secret (the new one is in the answer, shown only now) and keeps the events not ' +
        'delivered yet. For `expiresInSeconds` (24 h by default) every delivery carries two signatures in ' +
        '`webhook-signature`, space-separated: the new secret\'s first, then the previous one\'s, so the receiver can ' +
        'switch to the new secret whenever it likes within that time. A secret still in use from an earlier rotation ' +
        'is dropped. The body may be left out.',
      tags: ['webhooks'],
      security: ADMIN_SECURITY,
      params: WebhookIdParams,
      body: ref(WebhookSecretRotation),
      response: {
        200: {
          ...ref(RotatedWebhookSecret),
          description: 'The secret is replaced',
          headers: { 'Cache-Control': { type: 'string', description: 'no-store: the body holds a secret' } }
        },
        ...authenticatedOperationErrors,
        404: errorResponses.webhookNotFound,
        ...pathParameterErrors,
        ...bodyErrors
      }
    },
    // A rotation without a body takes the defaults.
    preValidation: async (request) => { request.body ??= {} }
  }, async (request, reply) => {
    const { id } = request.params
    const graceMs = (request.body.expiresInSeconds ?? DEFAULT_PREVIOUS_SECRET_SECONDS) * 1000
    const secret = newSigningSecret()
    const now = Date.now()
    if (!await webhooks.rotateSecret(id, secrets.seal(secret, id), graceMs === 0 ? undefined : now + graceMs)) throw webhookNotFound(id)
    request.log.info({ webhook: { id, previousSecretSeconds: graceMs / 1000 } }, 'webhook signing secret rotated')
    return reply.header('cache-control', 'no-store').send({ id, secret, previousSecretExpiresAt: new Date(now + graceMs).toISOString() })
  })

  routes.get('/:id/deliveries', {
    schema: {
      operationId: 'listWebhookDeliveries',
      summary: 'List recent delivery attempts',
      description: 'The subscription\'s attempts, newest first, kept for 7 days. Pass the last id of a page as ' +
        '`after` for older ones; the `Link` header with `rel="next"` names that page while there are more.',
      tags: ['webhooks'],
      security: ADMIN_SECURITY,
      params: WebhookIdParams,
      querystring: DeliveryAttemptQuery,
      response: {
        200: {
          ...DeliveryAttemptPage,
          description: 'A page of attempts, possibly empty',
          headers: { Link: { type: 'string', description: 'RFC 8288 link to the next page: `</admin/webhooks/{id}/deliveries?limit=N&after=ID>; rel="next"`' } }
        },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        404: errorResponses.webhookNotFound
      }
    }
  }, async (request, reply) => {
    const { id } = request.params
    const limit = request.query.limit === undefined ? DEFAULT_PAGE_SIZE : Number(request.query.limit)
    const after = request.query.after === undefined ? undefined : BigInt(request.query.after)
    if (await webhooks.getSubscription(id) === undefined) throw webhookNotFound(id)
    const page = await webhooks.listAttempts(id, { limit, ...(after === undefined ? {} : { after }) })
    if (page.nextAfter !== undefined) reply.header('link', `</admin/webhooks/${id}/deliveries?limit=${limit}&after=${page.nextAfter}>; rel="next"`)
    return reply.send(page.attempts.map(attemptDocument))
  })
}

/** A URL as log lines show it: a receiver's URL may carry credentials in its user info or query. */
function withoutCredentials (text: string): string {
  const url = new URL(text)
  url.username = ''
  url.password = ''
  url.search = ''
  return url.href
}

function subscriptionDocument (subscription: WebhookSubscriptionRecord) {
  return {
    id: subscription.id,
    url: subscription.url,
    events: [...subscription.events],
    createdAt: new Date(subscription.createdAt).toISOString(),
    ...(subscription.disabledAt === undefined ? {} : { disabledAt: new Date(subscription.disabledAt).toISOString() }),
    ...(subscription.disabledReason === undefined ? {} : { disabledReason: subscription.disabledReason })
  }
}

function statusDocument (subscription: WebhookSubscriptionStatusRecord, now = Date.now()) {
  return {
    ...subscriptionDocument(subscription),
    pending: subscription.pending,
    delivered: subscription.delivered,
    failed: subscription.failed,
    ...(subscription.lastError === undefined
      ? {}
      : { lastError: { at: new Date(subscription.lastError.at).toISOString(), message: subscription.lastError.message } }),
    ...(subscription.previousSecretUntil === undefined || subscription.previousSecretUntil <= now
      ? {}
      : { previousSecretExpiresAt: new Date(subscription.previousSecretUntil).toISOString() })
  }
}

function attemptDocument (attempt: DeliveryAttemptRecord) {
  return {
    id: attempt.id.toString(),
    eventId: attempt.eventId,
    type: attempt.type,
    attempt: attempt.attempt,
    ...(attempt.statusCode === undefined ? {} : { statusCode: attempt.statusCode }),
    ...(attempt.error === undefined ? {} : { error: attempt.error }),
    at: new Date(attempt.at).toISOString()
  }
}
