import type { FastifyInstance, FastifyReply } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { bearerAuth } from '../auth/bearer.js'
import { perTokenRateLimit } from '../auth/rate-limit.js'
import type { Scope } from '../auth/scopes.js'
import type { AccessTokenRegistry } from '../auth/token-registry.js'
import { plantIdConflict, plantNotFound } from '../errors.js'
import {
  DEFAULT_PAGE_SIZE, NewPlant, PageQuery, Plant, PlantIdParams, ref, StoredPlant, StoredPlantPage
} from '../schemas.js'
import type { PlantRecord, PlantStore } from '../store/plant-store.js'
import { bearerSecurity } from './docs.js'
import { answerUnmatched } from './method-not-allowed.js'
import { authenticatedOperationErrors, bodyErrors, errorResponses } from './responses.js'

export interface PlantsRoutesOptions {
  readonly store: PlantStore
  readonly accessTokens: AccessTokenRegistry
  readonly rateLimitPerMinute: number
}

/** Reads need `plants:read`, writes `plants:write`; any other method gets its 405 with any valid token. */
export function plantsScopeOf (method: string): Scope | undefined {
  switch (method) {
    case 'GET':
    case 'HEAD':
      return 'plants:read'
    case 'POST':
    case 'PUT':
    case 'PATCH':
    case 'DELETE':
      return 'plants:write'
    default:
      return undefined
  }
}

const READ_SECURITY = bearerSecurity('plants:read')
const WRITE_SECURITY = bearerSecurity('plants:write')

/**
 * The `/plants` resource, registered under the `/plants` prefix. Authentication and the scope guard
 * this whole scope, its not-found handler included, so even a 404 or 405 here needs a token. Each
 * handler makes one store call.
 */
export async function plantsRoutes (app: FastifyInstance, options: PlantsRoutesOptions): Promise<void> {
  const { store, accessTokens } = options
  await app.register(bearerAuth, { tokens: accessTokens, requiredScope: plantsScopeOf })
  await app.register(perTokenRateLimit, { perMinute: options.rateLimitPerMinute })
  app.setNotFoundHandler(answerUnmatched)
  const plants = app.withTypeProvider<TypeBoxTypeProvider>()

  plants.post('', {
    schema: {
      operationId: 'createPlant',
      summary: 'Create a plant',
      description: 'Adds a plant to the store. The answer is sent only after the plant is durably ' +
        'committed. Sending the same id, name and tag again is a safe retry (200, nothing changes); the ' +
        'same id with another name or tag is a 409. The `Location` header names the plant.',
      tags: ['plants'],
      security: WRITE_SECURITY,
      body: ref(NewPlant),
      response: {
        200: {
          ...ref(Plant),
          description: 'The plant is stored (or was already, with the same name and tag)',
          headers: { Location: { type: 'string', description: 'The path of the plant: /plants/{id}' } }
        },
        ...authenticatedOperationErrors,
        ...bodyErrors,
        409: errorResponses[409]
      }
    }
  }, async (request, reply) => {
    const { id, name, tag } = request.body
    const plant: PlantRecord = tag === undefined
      ? { id: BigInt(id), name }
      : { id: BigInt(id), name, tag }
    const outcome = await store.create(plant)
    if (outcome.status === 'conflict') throw plantIdConflict(plant.id)
    return reply.header('location', `/plants/${plant.id}`).send(toPlant(outcome.plant))
  })

  plants.get('', {
    schema: {
      operationId: 'listPlants',
      summary: 'List plants, a page at a time',
      description: 'Plants ordered by id ascending, negative ids first. Pass the last id of a page as ' +
        '`after` to get the next one; the `Link` header with `rel="next"` names that page for as long as ' +
        'more plants remain, and is absent on the last page.',
      tags: ['plants'],
      security: READ_SECURITY,
      querystring: PageQuery,
      response: {
        200: {
          ...StoredPlantPage,
          description: 'A page of plants, possibly empty',
          headers: { Link: { type: 'string', description: 'RFC 8288 link to the next page: </plants?limit=N&after=ID>; rel="next"' } }
        },
        ...authenticatedOperationErrors
      }
    }
  }, async (request, reply) => {
    const limit = request.query.limit === undefined ? DEFAULT_PAGE_SIZE : Number(request.query.limit)
    const after = request.query.after === undefined ? undefined : BigInt(request.query.after)
    const page = await store.list(after === undefined ? { limit } : { after, limit })
    if (page.nextAfter !== undefined) reply.header('link', `</plants?limit=${limit}&after=${page.nextAfter}>; rel="next"`)
    return sendJsonDocument(reply, page.json)
  })

  plants.get('/:id', {
    schema: {
      operationId: 'getPlant',
      summary: 'Read a plant',
      description: 'The plant with this id.',
      tags: ['plants'],
      security: READ_SECURITY,
      params: PlantIdParams,
      response: {
        200: { ...ref(StoredPlant), description: 'The plant' },
        ...authenticatedOperationErrors,
        404: errorResponses[404]
      }
    }
  }, async (request, reply) => {
    const id = BigInt(request.params.id)
    const plant = await store.get(id)
    if (plant === undefined) throw plantNotFound(id)
    return sendJsonDocument(reply, plant)
  })

  plants.delete('/:id', {
    schema: {
      operationId: 'deletePlant',
      summary: 'Delete a plant',
      description: 'Removes the plant; the answer is sent once the delete is durably committed. The id ' +
        'is free again afterwards: a later create with it, even with the old name and tag, makes a new plant.',
      tags: ['plants'],
      security: WRITE_SECURITY,
      params: PlantIdParams,
      response: {
        204: { type: 'null', description: 'The plant was deleted' },
        ...authenticatedOperationErrors,
        ...bodyErrors,
        404: errorResponses[404]
      }
    }
  }, async (request, reply) => {
    const id = BigInt(request.params.id)
    if (!await store.delete(id)) throw plantNotFound(id)
    return reply.code(204).send()
  })
}

/**
 * Sends a JSON document the store built (see `PlantJson`) as it is: Fastify serializes only what is not
 * already text. Its shape is the route's response schema, which the store contract tests hold every
 * backend to.
 */
function sendJsonDocument (reply: FastifyReply, json: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json)
}

function toPlant ({ name, tag }: PlantRecord): Plant {
  return tag === undefined ? { name } : { name, tag }
}
