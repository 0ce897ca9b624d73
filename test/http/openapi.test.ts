import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import SwaggerParser from '@apidevtools/swagger-parser'
import { describe, expect, it } from 'vitest'
import { memoryBackend, sharedTestApp } from '../helpers/app.js'

const CHECKED_IN = new URL('../../openapi/openapi.json', import.meta.url)

interface OperationObject {
  readonly responses: Record<string, { readonly content?: Record<string, { readonly example?: { error?: unknown, message?: string } }> }>
}

describe('The OpenAPI document', () => {
  // Every test reads the document or the UI of the same default app, and none writes.
  const shared = sharedTestApp(memoryBackend)

  it('served at /openapi.json without a token is identical to openapi/openapi.json (run `npm run openapi` after a change)', async () => {
    const app = shared()

    const response = await app.inject({ method: 'GET', url: '/openapi.json' })

    expect(response.statusCode).toBe(200)
    expect(response.json()).toEqual(JSON.parse(readFileSync(CHECKED_IN, 'utf8')))
  })

  it('is valid OpenAPI 3.1', async () => {
    const app = shared()
    const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()

    const validated = await SwaggerParser.validate(structuredClone(document))

    expect(document.openapi).toBe('3.1.0')
    expect(document.servers).toEqual([{ url: '/', description: expect.any(String) }])
    expect(validated.info.title).toBe('plantstore')
  })

  it('names the shared schemas as components, with the seed fields and int64 ids', async () => {
    const app = shared()
    const { components } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()

    expect(Object.keys(components.schemas).sort()).toEqual([
      'AccessToken', 'BatchDelete', 'BatchPatch', 'BatchPost', 'BatchPut', 'BatchRequest', 'BatchResult', 'BatchResults', 'Change', 'ChangeHead', 'CreatedAccessToken', 'CreatedWebhookSubscription', 'DeliveryAttempt', 'Error', 'Health', 'NewAccessToken',
      'NewPlant', 'NewWebhookSubscription', 'Plant', 'PlantHistoryChange', 'PlantPatch', 'PlantReplacement', 'RotatedWebhookSecret', 'StoredPlant',
      'WebhookSecretRotation', 'WebhookSubscription', 'WebhookSubscriptionStatus'
    ])
    expect(components.schemas.StoredPlant.required).toEqual(['id', 'name'])
    expect(components.schemas.NewPlant.required).toEqual(['id', 'name'])
    expect(components.schemas.NewPlant.properties.id).toMatchObject({ type: 'integer', format: 'int64' })
    expect(components.schemas.Plant.required).toEqual(['name'])
    expect(components.schemas.Plant.properties.name).toMatchObject({ type: 'string', minLength: 1, maxLength: 256 })
    expect(components.schemas.PlantReplacement.required).toEqual(['name'])
    expect(components.schemas.PlantReplacement.properties.id).toMatchObject({ type: 'integer', format: 'int64' })
    expect(components.schemas.PlantPatch.required).toBeUndefined()
    expect(components.schemas.PlantPatch.properties.tag).toMatchObject({ type: ['string', 'null'], maxLength: 256 })
    expect(components.schemas.Error.required).toEqual(['error', 'message'])
    expect(components.schemas.Error.properties.error).toMatchObject({ type: 'integer', format: 'int32' })
    expect(components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
  })

  it.each([
    ['/plants', 'post', 'createPlant', 'plants', 'plants:write', ['200', '400', '401', '403', '409', '413', '415', '429', '500', '503'], 'Plant'],
    ['/plants', 'get', 'listPlants', 'plants', 'plants:read', ['200', '400', '401', '403', '429', '500', '503'], undefined],
    ['/plants/{id}', 'get', 'getPlant', 'plants', 'plants:read', ['200', '304', '400', '401', '403', '404', '412', '414', '429', '500', '503'], 'StoredPlant'],
    ['/plants/{id}', 'put', 'replacePlant', 'plants', 'plants:write', ['200', '201', '400', '401', '403', '412', '413', '414', '415', '429', '500', '503'], 'StoredPlant'],
    ['/plants/{id}', 'patch', 'updatePlant', 'plants', 'plants:write', ['200', '400', '401', '403', '404', '412', '413', '414', '415', '429', '500', '503'], 'StoredPlant'],
    ['/plants/{id}', 'delete', 'deletePlant', 'plants', 'plants:write', ['204', '400', '401', '403', '404', '412', '413', '414', '415', '429', '500', '503'], undefined],
    ['/plants/changes', 'get', 'listChanges', 'changes', 'plants:read', ['200', '400', '401', '403', '410', '429', '500', '503'], undefined],
    ['/plants/changes/head', 'get', 'getChangeHead', 'changes', 'plants:read', ['200', '400', '401', '403', '429', '500', '503'], 'ChangeHead'],
    ['/plants/{id}/history', 'get', 'getPlantHistory', 'changes', 'plants:read', ['200', '400', '401', '403', '404', '414', '429', '500', '503'], undefined],
    ['/admin/tokens', 'post', 'createAccessToken', 'tokens', 'admin', ['201', '400', '401', '403', '409', '413', '415', '429', '500', '503'], 'CreatedAccessToken'],
    ['/admin/tokens', 'get', 'listAccessTokens', 'tokens', 'admin', ['200', '400', '401', '403', '429', '500', '503'], undefined],
    ['/admin/tokens/{id}', 'get', 'getAccessToken', 'tokens', 'admin', ['200', '400', '401', '403', '404', '414', '429', '500', '503'], 'AccessToken'],
    ['/admin/tokens/{id}', 'delete', 'revokeAccessToken', 'tokens', 'admin', ['204', '400', '401', '403', '404', '409', '413', '414', '415', '429', '500', '503'], undefined],
    ['/admin/webhooks', 'post', 'createWebhookSubscription', 'webhooks', 'admin', ['201', '400', '401', '403', '413', '415', '429', '500', '503'], 'CreatedWebhookSubscription'],
    ['/admin/webhooks', 'get', 'listWebhookSubscriptions', 'webhooks', 'admin', ['200', '400', '401', '403', '429', '500', '503'], undefined],
    ['/admin/webhooks/{id}', 'get', 'getWebhookSubscription', 'webhooks', 'admin', ['200', '400', '401', '403', '404', '414', '429', '500', '503'], 'WebhookSubscriptionStatus'],
    ['/admin/webhooks/{id}', 'delete', 'deleteWebhookSubscription', 'webhooks', 'admin', ['204', '400', '401', '403', '404', '413', '414', '415', '429', '500', '503'], undefined],
    ['/admin/webhooks/{id}/deliveries', 'get', 'listWebhookDeliveries', 'webhooks', 'admin', ['200', '400', '401', '403', '404', '414', '429', '500', '503'], undefined],
    ['/admin/webhooks/{id}/rotate-secret', 'post', 'rotateWebhookSecret', 'webhooks', 'admin', ['200', '400', '401', '403', '404', '413', '414', '415', '429', '500', '503'], 'RotatedWebhookSecret']
  ])('documents %s %s (%s) fully: every status, the shared Error, the bearer requirement with its scope', async (path, method, operationId, tag, scope, statuses, success) => {
    const app = shared()
    const { paths } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const operation = paths[path][method]

    expect(operation).toMatchObject({ operationId, tags: [tag], security: [{ bearerAuth: [scope] }] })
    expect(operation.summary.length).toBeGreaterThan(5)
    expect(operation.description.length).toBeGreaterThan(10)
    expect(Object.keys(operation.responses).sort()).toEqual(statuses)
    for (const [status, response] of Object.entries<{ description: string, content?: Record<string, { schema: unknown }> }>(operation.responses)) {
      expect(response.description.length).toBeGreaterThan(5)
      if (status.startsWith('2') || status === '304') continue
      expect(response.content?.['application/json']?.schema).toEqual({ $ref: '#/components/schemas/Error' })
    }
    if (success !== undefined) {
      const successStatus = Object.keys(operation.responses).find((status) => status.startsWith('2')) as string
      expect(operation.responses[successStatus].content['application/json'].schema).toEqual({ $ref: `#/components/schemas/${success}` })
    }
  })

  it('documents the path and query parameters as integers, the tag filter, and the precondition headers', async () => {
    const app = shared()
    const { paths } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const idParameter = expect.objectContaining({
      in: 'path', name: 'id', required: true, schema: expect.objectContaining({ type: 'integer', format: 'int64' })
    })
    const header = (name: string) => expect.objectContaining({ in: 'header', name, required: false, schema: { type: 'string' } })

    expect(paths['/plants/{id}'].get.parameters).toEqual([idParameter, header('if-none-match'), header('if-match')])
    expect(paths['/plants/{id}'].put.parameters).toEqual([idParameter, header('if-match'), header('if-none-match')])
    expect(paths['/plants/{id}'].patch.parameters).toEqual([idParameter, header('if-match')])
    expect(paths['/plants/{id}'].delete.parameters).toEqual([idParameter, header('if-match')])
    expect(Object.keys(paths['/plants/{id}'].patch.requestBody.content)).toEqual(['application/merge-patch+json'])
    expect(paths['/plants'].get.parameters).toEqual([
      expect.objectContaining({ in: 'query', name: 'limit', schema: expect.objectContaining({ type: 'integer', minimum: 1, maximum: 1000, default: 100 }) }),
      expect.objectContaining({ in: 'query', name: 'sort', schema: { type: 'string', enum: ['id', '-id', 'name', '-name'] } }),
      expect.objectContaining({ in: 'query', name: 'after', schema: expect.objectContaining({ type: 'integer', format: 'int64' }) }),
      expect.objectContaining({ in: 'query', name: 'cursor', schema: { type: 'string', minLength: 1, maxLength: 4200 } }),
      expect.objectContaining({ in: 'query', name: 'tag', schema: expect.objectContaining({ type: 'string', minLength: 0, maxLength: 256 }) }),
      expect.objectContaining({ in: 'query', name: 'q', schema: expect.objectContaining({ type: 'string', minLength: 1, maxLength: 100 }) }),
      header('prefer')
    ])
    expect(Object.keys(paths['/plants'].get.responses['200'].headers)).toEqual(['Link', 'X-Total-Count', 'Preference-Applied', 'Vary'])
    expect(paths['/plants'].get.responses['200'].content['application/json'].schema).toEqual({
      type: 'array', items: { $ref: '#/components/schemas/StoredPlant' }, description: expect.any(String)
    })
  })

  it('documents the change feed: its filters and Last-Event-ID, a page of changes or an event stream with its Link, each history change with who made it', async () => {
    const app = shared()
    const { paths, components, tags } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const feed = paths['/plants/changes'].get
    const history = paths['/plants/{id}/history'].get

    expect(tags).toContainEqual({ name: 'changes', description: expect.stringContaining('commit order') })
    expect(feed.parameters.map((parameter: { in: string, name: string }) => `${parameter.in} ${parameter.name}`))
      .toEqual(['query after', 'query limit', 'query tag', 'query type', 'header accept', 'header last-event-id'])
    expect(feed.parameters.find((parameter: { name: string }) => parameter.name === 'after').schema).toEqual({ type: 'integer', format: 'int64', minimum: 0 })
    expect(feed.parameters.find((parameter: { name: string }) => parameter.name === 'last-event-id').schema).toEqual({ type: 'integer', format: 'int64', minimum: 0 })
    expect(Object.keys(feed.responses['200'].headers)).toEqual(['Link'])
    expect(Object.keys(feed.responses['200'].content)).toEqual(['application/json', 'text/event-stream'])
    expect(feed.responses['200'].content['application/json'].schema.items).toEqual({ $ref: '#/components/schemas/Change' })
    expect(Object.keys(feed.responses['503'].headers)).toEqual(['Retry-After'])
    expect(history.parameters.map((parameter: { in: string, name: string }) => `${parameter.in} ${parameter.name}`)).toEqual(['query after', 'query limit', 'path id'])
    expect(Object.keys(history.responses['200'].headers)).toEqual(['Link'])
    expect(history.responses['200'].content['application/json'].schema.items).toEqual({ $ref: '#/components/schemas/PlantHistoryChange' })
    expect(components.schemas.Change.required).toEqual(['seq', 'type', 'id', 'at'])
    expect(components.schemas.Change.properties.type.enum).toEqual(['plant.created', 'plant.updated', 'plant.deleted'])
    expect(components.schemas.Change.properties.at).toMatchObject({ type: 'string', format: 'date-time' })
    expect(components.schemas.PlantHistoryChange.required).toEqual(['seq', 'type', 'id', 'at', 'by'])
    expect(components.schemas.ChangeHead.properties.seq).toMatchObject({ type: 'integer', format: 'int64' })
  })

  it('documents the webhook subscription operations: the secret-bearing 201, the uuid id, the deliveries page and its Link', async () => {
    const app = shared()
    const { paths, components } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const idParameter = expect.objectContaining({ in: 'path', name: 'id', required: true, schema: { type: 'string', format: 'uuid' } })

    expect(paths['/admin/webhooks'].post.requestBody).toEqual({
      content: { 'application/json': { schema: { $ref: '#/components/schemas/NewWebhookSubscription' } } }, required: true
    })
    expect(Object.keys(paths['/admin/webhooks'].post.responses['201'].headers).sort()).toEqual(['Cache-Control', 'Location'])
    expect(paths['/admin/webhooks'].get.responses['200'].content['application/json'].schema).toEqual({
      type: 'array', items: { $ref: '#/components/schemas/WebhookSubscription' }, description: expect.any(String)
    })
    expect(paths['/admin/webhooks/{id}'].get.parameters).toEqual([idParameter])
    expect(paths['/admin/webhooks/{id}'].delete.parameters).toEqual([idParameter])
    const deliveries = paths['/admin/webhooks/{id}/deliveries'].get
    expect(deliveries.parameters).toEqual([
      expect.objectContaining({ in: 'query', name: 'limit', schema: expect.objectContaining({ type: 'integer', minimum: 1, maximum: 1000, default: 100 }) }),
      expect.objectContaining({ in: 'query', name: 'after', schema: expect.objectContaining({ type: 'integer', format: 'int64' }) }),
      idParameter
    ])
    expect(Object.keys(deliveries.responses['200'].headers)).toEqual(['Link'])
    expect(deliveries.responses['200'].content['application/json'].schema).toEqual({
      type: 'array', items: { $ref: '#/components/schemas/DeliveryAttempt' }, description: expect.any(String)
    })
    expect(components.schemas.NewWebhookSubscription.required).toEqual(['url'])
    expect(components.schemas.NewWebhookSubscription.properties.events).toMatchObject({
      type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: ['plant.created', 'plant.updated', 'plant.deleted'] }
    })
    expect(components.schemas.CreatedWebhookSubscription.required).toEqual(['id', 'url', 'events', 'createdAt', 'secret'])
    expect(components.schemas.WebhookSubscription.properties.secret).toBeUndefined()
    expect(components.schemas.WebhookSubscriptionStatus.required).toEqual(['id', 'url', 'events', 'createdAt', 'pending', 'delivered', 'failed'])
    expect(components.schemas.DeliveryAttempt.required).toEqual(['id', 'eventId', 'type', 'attempt', 'at'])
  })

  it('describes the events it posts under `webhooks`, plant.created being the upstream /plant/webhook callback', async () => {
    const app = shared()
    const { webhooks, tags } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const header = (name: string, schema: object) => ({ name, in: 'header', required: true, description: expect.any(String), schema })
    const event = (type: string, operationId: string, requestBody: object) => ({
      post: {
        operationId,
        summary: expect.any(String),
        description: expect.stringContaining(`\`${type}\``),
        tags: ['webhooks'],
        security: [],
        parameters: [
          header('webhook-id', { type: 'string', pattern: '^msg_[0-9a-f]{32}$', examples: [expect.stringMatching(/^msg_[0-9a-f]{32}$/)] }),
          header('webhook-timestamp', { type: 'integer', format: 'int64', examples: [expect.any(Number)] }),
          header('webhook-signature', { type: 'string', pattern: '^v1,[A-Za-z0-9+/]{43}=$', examples: [expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/)] }),
          header('webhook-event', { type: 'string', enum: [type] })
        ],
        requestBody: { required: true, ...requestBody },
        responses: {
          '2XX': { description: expect.stringContaining('delivered') },
          410: { description: expect.stringContaining('disabled') },
          default: { description: expect.stringContaining('sent again') }
        }
      }
    })
    const newPlantBody = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPlant' } } } })

    expect(Object.keys(webhooks)).toEqual(['plant.created', 'plant.updated', 'plant.deleted'])
    expect(webhooks['plant.created']).toEqual(event('plant.created', 'plantCreatedWebhook', newPlantBody('Plant added to the store')))
    expect(webhooks['plant.created'].post.description).toMatch(/^Information about a new plant added to the store/)
    expect(webhooks['plant.updated']).toEqual(event('plant.updated', 'plantUpdatedWebhook', newPlantBody('The plant after the change')))
    expect(webhooks['plant.deleted']).toEqual(event('plant.deleted', 'plantDeletedWebhook', {
      description: expect.any(String),
      content: {
        'application/json': {
          schema: { type: 'object', required: ['id'], properties: { id: expect.objectContaining({ type: 'integer', format: 'int64' }) } }
        }
      }
    }))
    expect(tags).toContainEqual({ name: 'webhooks', description: expect.any(String) })
  })

  it('never shows a token or a digest in an example', async () => {
    const app = shared()
    const text = (await app.inject({ method: 'GET', url: '/openapi.json' })).body

    expect(text).not.toMatch(/pst_[A-Za-z0-9_-]{43}/)
    expect(text).not.toMatch(/[0-9a-fA-F]{64}/)
    expect(JSON.parse(text).components.schemas.CreatedAccessToken.properties.token.examples).toBeUndefined()
  })

  it('shows, for every error status of every operation, an example whose error is that status', async () => {
    const app = shared()
    const { paths } = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, OperationObject>> }

    const examples = Object.entries(paths).flatMap(([path, operations]) => Object.entries(operations).flatMap(([method, operation]) =>
      Object.entries(operation.responses).filter(([status]) => Number(status) >= 400).map(([status, response]) =>
        ({ where: `${method.toUpperCase()} ${path} ${status}`, status: Number(status), example: response.content?.['application/json']?.example }))))

    expect(examples.length).toBeGreaterThan(100)
    for (const { where, status, example } of examples) {
      expect({ where, error: example?.error }).toEqual({ where, error: status })
      expect(example?.message, where).toMatch(/^\S.*\S$/)
    }
  })

  it('writes no description that Swagger UI would read as an HTML tag and drop (code spans aside)', async () => {
    const app = shared()
    const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
    const tagLike: string[] = []
    const visit = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(visit)
      else if (typeof value === 'object' && value !== null) {
        for (const [key, member] of Object.entries(value)) {
          if (key === 'description' && typeof member === 'string' && /<[^>]*>/.test(member.replace(/`[^`]*`/g, ''))) tagLike.push(member)
          else visit(member)
        }
      }
    }

    visit(document)

    expect(tagLike).toEqual([])
  })

  it('passes `redocly lint` with the recommended rules', () => {
    const result = spawnSync(process.execPath, [fileURLToPath(new URL('../../node_modules/@redocly/cli/bin/cli.js', import.meta.url)),
      'lint', fileURLToPath(CHECKED_IN), '--extends', 'recommended', '--format', 'stylish'], { encoding: 'utf8' })

    const output = result.stdout + result.stderr
    expect(result.status).toBe(0)
    expect(output).toContain('Your API description is valid')
    expect(output).not.toMatch(/You have \d+ warnings?/)
  })

  it('is explorable in Swagger UI at /docs without a token', async () => {
    const app = shared()

    const page = await app.inject({ method: 'GET', url: '/docs/' })
    const initializer = await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' })

    expect(page.statusCode).toBe(200)
    expect(page.headers['content-type']).toMatch(/^text\/html/)
    expect(page.body).toContain('swagger-ui')
    expect(initializer.statusCode).toBe(200)
  })
})
