import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { bearerAuth } from '../auth/bearer.js'
import type { AccessTokens } from '../auth/tokens.js'
import { plantIdConflict } from '../errors.js'
import { NewPlant, Plant, ref } from '../schemas.js'
import type { PlantRecord, PlantStore } from '../store/plant-store.js'
import { BEARER_SECURITY } from './docs.js'
import { allowOnly } from './method-not-allowed.js'
import { errorResponses } from './responses.js'

export interface PlantsRoutesOptions {
  readonly store: PlantStore
  readonly accessTokens: AccessTokens
}

const { 400: badRequest, 401: unauthorized, 409: conflict, 413: tooLarge, 415: unsupported, 500: internal, 503: unavailable } = errorResponses

/** The `/plants` resource. Authentication guards this whole scope; handlers make one store call. */
export async function plantsRoutes (app: FastifyInstance, options: PlantsRoutesOptions): Promise<void> {
  const { store, accessTokens } = options
  await app.register(bearerAuth, { accessTokens })
  const plants = app.withTypeProvider<TypeBoxTypeProvider>()

  plants.post('/plants', {
    schema: {
      operationId: 'createPlant',
      summary: 'Create a plant',
      description: 'Adds a plant to the store. The answer is sent only after the plant is durably ' +
        'committed. Sending the same id, name and tag again is a safe retry (200, nothing changes); the ' +
        'same id with another name or tag is a 409. The `Location` header names the plant.',
      tags: ['plants'],
      security: BEARER_SECURITY,
      body: ref(NewPlant),
      response: {
        200: {
          ...ref(Plant),
          description: 'The plant is stored (or was already, with the same name and tag)',
          headers: { Location: { type: 'string', description: 'The path of the plant: /plants/{id}' } }
        },
        400: badRequest,
        401: unauthorized,
        409: conflict,
        413: tooLarge,
        415: unsupported,
        500: internal,
        503: unavailable
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

  allowOnly(app, '/plants', ['POST'])
}

function toPlant ({ name, tag }: PlantRecord): Plant {
  return tag === undefined ? { name } : { name, tag }
}
