import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Scope } from '../auth/scopes.js'
import { sharedSchemas } from '../schemas.js'

/** An operation's security requirement: a Bearer token with this scope (OpenAPI 3.1 lets an http scheme list roles). */
export const bearerSecurity = (scope: Scope) => [{ bearerAuth: [scope] }]

/**
 * Collects every route into an OpenAPI 3.1 document whose components are the shared TypeBox schemas,
 * under their own names. Registered before the routes so it sees them all.
 */
export const openApiDocument = fp(async function openApiDocument (app: FastifyInstance, options: { version: string }) {
  for (const schema of sharedSchemas) app.addSchema(schema)

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'plantstore',
        version: options.version,
        description: 'A plant store: create, read, list and delete plants. Every `/plants` and `/admin` operation ' +
          'needs `Authorization: Bearer <token>` with the scope the operation lists (`plants:read`, `plants:write` ' +
          'or `admin`); every error is an `Error` body whose `error` equals the HTTP status.',
        license: { name: 'MIT', identifier: 'MIT' }
      },
      servers: [{ url: '/', description: 'The service that serves this document' }],
      tags: [
        { name: 'plants', description: 'The plant store' },
        { name: 'tokens', description: 'Access tokens: create, list and revoke them (scope `admin`)' },
        { name: 'operations', description: 'Probes and documentation for operators' }
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An access token: one made by `POST /admin/tokens` or `plantstore tokens create`, an ' +
              'entry of PLANTSTORE_TOKENS, or the `initial-admin` token the first start printed. Each ' +
              'operation lists the scope it needs.'
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
