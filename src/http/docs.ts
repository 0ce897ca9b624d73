import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { JwtSettings } from '../auth/jwt/jwt-settings.js'
import type { Scope } from '../store/scopes.js'
import { sharedSchemas } from '../schemas/components.js'
import type { WebhookEventType } from '../store/webhook-store.js'

/** An operation's security requirement: a Bearer token with this scope (OpenAPI 3.1 lets an http scheme list roles). */
export const bearerSecurity = (scope: Scope) => [{ bearerAuth: [scope] }]

interface PropertySchema {
  type: 'string' | 'integer'
  format?: string
  pattern?: string
  enum?: string[]
  description?: string
  examples?: unknown[]
}

const webhookHeader = (name: string, description: string, schema: PropertySchema) =>
  ({ name, in: 'header' as const, required: true, description, schema })

/** The Standard Webhooks headers of every delivery, and `webhook-event` naming its type. */
const deliveryHeaders = (type: WebhookEventType) => [
  webhookHeader('webhook-id', 'The event\'s id, the same on every attempt of the event: a receiver that has seen it already ' +
    'acknowledges without acting again (delivery is at least once)',
  { type: 'string', pattern: '^msg_[0-9a-f]{32}$', examples: ['msg_6f1c0e2b9a8d4c3b8e7f6a5b4c3d2e1f'] }),
  webhookHeader('webhook-timestamp', 'Unix seconds when this attempt was made; a receiver refuses one too far from its own clock',
    { type: 'integer', format: 'int64', examples: [1767225600] }),
  webhookHeader('webhook-signature', '`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the ' +
    'key of the subscription\'s secret (the base64 after `whsec_`), as the Standard Webhooks libraries verify it',
  { type: 'string', pattern: '^v1,[A-Za-z0-9+/]{43}=$', examples: ['v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='] }),
  webhookHeader('webhook-event', 'The type of the event', { type: 'string', enum: [type] })
]

const deliveryResponses = {
  '2XX': { description: 'Any 2xx answer within 10 s: the event is delivered' },
  410: { description: 'Gone: the subscription is disabled, and neither this event nor any later one is sent to it' },
  default: {
    description: 'Any other answer, or none within 10 s: the event is sent again with exponential backoff and jitter ' +
      '(by default first after about 5 s, doubling, at most 1 h apart, for 24 h), then counted as failed. A later ' +
      'event of the same plant waits until this one is settled.'
  }
}

type BodySchema = { $ref: string } | { type: 'object', required: string[], properties: Record<string, PropertySchema> }

const plantEvent = (type: WebhookEventType, summary: string, description: string, body: { description: string, schema: BodySchema }) => ({
  post: {
    operationId: `${type.replace(/\.(\w)/, (_dot, letter: string) => letter.toUpperCase())}Webhook`,
    summary,
    description: `${description} Posted to every enabled subscription whose \`events\` holds \`${type}\`, recorded in the ` +
      'transaction of the write that caused it and first sent within 2 s of its commit.',
    tags: ['webhooks'],
    security: [],
    parameters: deliveryHeaders(type),
    requestBody: { description: body.description, required: true, content: { 'application/json': { schema: body.schema } } },
    responses: deliveryResponses
  }
})

const NEW_PLANT = { $ref: '#/components/schemas/NewPlant' }

/**
 * The events posted to webhook subscriptions, as OpenAPI 3.1 `webhooks`. `plant.created` is the upstream
 * document's `/plant/webhook` callback: "Information about a new plant added to the store", a `NewPlant` body.
 */
const webhooks = {
  'plant.created': plantEvent('plant.created', 'A plant was created',
    'Information about a new plant added to the store: its id, name, and tag when it has one.',
    { description: 'Plant added to the store', schema: NEW_PLANT }),
  'plant.updated': plantEvent('plant.updated', 'A plant was changed',
    'A `PUT` or `PATCH` changed a plant (one that changed nothing sends no event): the plant as it is now.',
    { description: 'The plant after the change', schema: NEW_PLANT }),
  'plant.deleted': plantEvent('plant.deleted', 'A plant was deleted', 'A `DELETE` removed a plant: its id.', {
    description: 'The id of the deleted plant',
    schema: {
      type: 'object',
      required: ['id'],
      properties: { id: { type: 'integer', format: 'int64', description: 'The id of the plant that was deleted', examples: [10] } }
    }
  })
}

export interface OpenApiDocumentOptions {
  readonly version: string
  /** The identity provider whose JWT access tokens are accepted too, when one is configured. */
  readonly jwt?: Pick<JwtSettings, 'issuer' | 'audiences' | 'scopeClaim'> | undefined
}

function jwtDescription (jwt: Pick<JwtSettings, 'issuer' | 'audiences' | 'scopeClaim'>): string {
  return `; or a JWT access token issued by ${jwt.issuer} for the audience ${jwt.audiences.join(' or ')}, ` +
    `its scopes in the \`${jwt.scopeClaim}\` claim`
}

/**
 * Collects every route into an OpenAPI 3.1 document whose components are the shared TypeBox schemas,
 * under their own names. Registered before the routes so it sees them all.
 */
export const openApiDocument = fp(async function openApiDocument (app: FastifyInstance, options: OpenApiDocumentOptions) {
  for (const schema of sharedSchemas) app.addSchema(schema)

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'plantstore',
        version: options.version,
        description: 'A plant store: create, read, list and delete plants. Every `/plants` and `/admin` operation ' +
          'needs `Authorization: Bearer <token>` with the scope the operation lists (`plants:read`, `plants:write` ' +
          'or `admin`); every error is an `Error` body whose `error` equals the HTTP status. Subscriptions made ' +
          'under `/admin/webhooks` receive the events of `webhooks`.\n\n' +
          'Ids are 64-bit integers, and the service sends every digit. Swagger UI, however, shows a response body ' +
          'after reading it as JavaScript numbers, which are exact only up to 2^53: an id such as 9007199254740993 ' +
          'is shown here as 9007199254740992. The answer itself is exact; read it with curl, or with a client that ' +
          'keeps 64-bit integers (such as `@plantstore/client`).',
        license: { name: 'MIT', identifier: 'MIT' }
      },
      servers: [{ url: '/', description: 'The service that serves this document' }],
      webhooks,
      tags: [
        { name: 'plants', description: 'The plant store' },
        { name: 'changes', description: 'Every write in commit order: pages to poll, a live stream (Server-Sent Events), the head, and each plant\'s history (scope `plants:read`)' },
        { name: 'tokens', description: 'Access tokens: create, list and revoke them (scope `admin`)' },
        { name: 'webhooks', description: 'Webhook subscriptions (scope `admin`), their delivery attempts, and the signed events posted to them' },
        { name: 'export', description: 'Every plant as NDJSON, for backups and moves between stores (scope `admin`)' },
        { name: 'operations', description: 'Probes and documentation for operators' }
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An access token: one made by `POST /admin/tokens` or `plantstore tokens create`, an ' +
              'entry of PLANTSTORE_TOKENS, or the `initial-admin` token the first start printed' +
              (options.jwt === undefined ? '' : jwtDescription(options.jwt)) + '. Each operation lists the scope it needs.'
          }
        }
      }
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, index) => typeof json.$id === 'string' ? json.$id : `def-${index}`
    }
  })
}, { name: 'openapi-document' })

/** `GET /openapi.json` (the document) and `GET /docs` (Swagger UI for it). Neither needs a token. */
export async function docsRoutes (app: FastifyInstance): Promise<void> {
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { tryItOutEnabled: true, displayOperationId: true, validatorUrl: null }
  })
}
