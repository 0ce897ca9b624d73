import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from '@sinclair/typebox'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { bearerAuth, writerOf } from '../auth/bearer.js'
import { perTokenRateLimit } from '../auth/rate-limit.js'
import type { Scope } from '../store/scopes.js'
import { plantIdConflict, plantIdMismatch, plantNotFound, preconditionFailed } from '../errors.js'
import { ref } from '../schemas/kinds.js'
import { NewPlant, Plant, PlantIdParams, PlantListQuery, PlantPatch, PlantReplacement, StoredPlant, StoredPlantPage } from '../schemas/plants.js'
import { plantJson, plantJsonOfMembers, plantMembersJson, type PlantJson } from '../store/plant-document.js'
import { plantRecord, type Expectation, type PlantRecord, type PlantStore, type Stale } from '../store/plant-store.js'
import { bearerSecurity } from './docs.js'
import { entityTagOf, matchesStrongly } from './entity-tags.js'
import { preconditionsOf } from './preconditions.js'
import { plantBatchRoutes } from './plant-batch.js'
import { changesRoutes, type ChangesRoutesOptions } from './changes.js'
import { acceptJsonBodiesAs, MERGE_PATCH_MEDIA_TYPE } from './json-body.js'
import { answerUnmatched } from './method-not-allowed.js'
import { listingOf, nextPageLink, readListing } from './plant-listing.js'
import { prefersExactCount } from './prefer.js'
import { authenticatedOperationErrors, pathParameterErrors, bodyErrors, errorResponses } from './responses.js'

export interface PlantsRoutesOptions {
  readonly store: PlantStore
  readonly rateLimitPerMinute: number
  /** BATCH_BODY_LIMIT. */
  readonly batchBodyLimit: number
  readonly changes: ChangesRoutesOptions
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

const ETAG = {
  ETag: { type: 'string', description: 'The strong entity tag of the plant as it is now: send it in If-Match to change exactly this version' }
} as const
const LOCATION = { Location: { type: 'string', description: 'The path of the plant: /plants/{id}' } } as const
const IF_MATCH = {
  'if-match': Type.Optional(Type.String({ description: 'Change the plant only while its ETag is one of these (`*`: while it exists); otherwise 412' }))
}

/**
 * The `/plants` resource, registered under the `/plants` prefix. Authentication and the scope guard
 * this whole scope, its not-found handler included, so even a 404 or 405 here needs a token. Each
 * handler makes one store call, a conditional write one more: it reads the plant its preconditions are
 * checked against.
 */
export async function plantsRoutes (app: FastifyInstance, options: PlantsRoutesOptions): Promise<void> {
  const { store } = options
  await app.register(bearerAuth, { requiredScope: plantsScopeOf })
  await app.register(perTokenRateLimit, { perMinute: options.rateLimitPerMinute })
  app.setNotFoundHandler(answerUnmatched)
  await app.register(plantBatchRoutes, { store, bodyLimit: options.batchBodyLimit })
  await app.register(changesRoutes, options.changes)
  const plants = app.withTypeProvider<TypeBoxTypeProvider>()

  /**
   * Runs a write under the request's If-Match and If-None-Match (RFC 9110 §13.2.2), with none at once.
   * With preconditions it reads the plant, checks them against its ETag (412 when they fail), and asks
   * the store to write only while the plant is still that one; when a concurrent write came first, the
   * preconditions are checked again against what the store holds now.
   */
  async function writeIfPreconditionsHold<Outcome extends { readonly status: string }> (
    request: FastifyRequest,
    id: bigint,
    write: (expected?: Expectation) => Promise<Outcome | Stale>
  ): Promise<Outcome> {
    const preconditions = preconditionsOf(request)
    if (preconditions === undefined) return await write() as Outcome
    let current = await readRecord(store, id)
    for (;;) {
      if (!preconditions.holdFor(current === undefined ? undefined : entityTagOf(plantJson(current.id, current.name, current.tag)))) {
        throw preconditionFailed(id, current !== undefined)
      }
      const outcome = await write({ plant: current })
      if (outcome.status !== 'stale') return outcome as Outcome
      current = (outcome as Stale).current
    }
  }

  plants.post('', {
    schema: {
      operationId: 'createPlant',
      summary: 'Create a plant',
      description: 'Adds a plant to the store. The answer is sent only after the plant is durably ' +
        'committed. Sending the same id, name and tag again is a safe retry (200, nothing changes); the ' +
        'same id with another name or tag is a 409: change a plant with PUT or PATCH. The `Location` ' +
        'header names the plant.',
      tags: ['plants'],
      security: WRITE_SECURITY,
      body: ref(NewPlant),
      response: {
        200: {
          ...ref(Plant),
          description: 'The plant is stored (or was already, with the same name and tag)',
          headers: { ...LOCATION, ...ETAG }
        },
        ...authenticatedOperationErrors,
        ...bodyErrors,
        409: errorResponses[409]
      }
    }
  }, async (request, reply) => {
    const { id, name, tag } = request.body
    const plant = plantRecord(BigInt(id), name, tag)
    const outcome = await store.create(plant, writerOf(request))
    if (outcome.status === 'conflict') throw plantIdConflict(plant.id)
    // Created or replayed, the store holds this very name and tag: the document and the answer share its members.
    const members = plantMembersJson(plant.name, plant.tag)
    reply
      .header('location', `/plants/${plant.id}`)
      .header('etag', entityTagOf(plantJsonOfMembers(plant.id, members)))
    return sendJsonDocument(reply, `{${members}}`)
  })

  plants.get('', {
    schema: {
      operationId: 'listPlants',
      summary: 'List, sort and search plants, a page at a time',
      description: 'Plants in the order `sort` names: by id (the default; negative ids first) or by name, either way, ' +
        'optionally only those with one tag and those whose name contains `q`. The `Link` header with `rel="next"` names ' +
        'the next page, every parameter kept, for as long as more plants remain, and is absent on the last page: id orders ' +
        'continue with `after`, name orders with `cursor`. Following the links returns every plant that exists throughout ' +
        'exactly once, whatever is written meanwhile. With `Prefer: count=exact` the answer also counts the plants that ' +
        'match on all pages (`X-Total-Count`); nothing is counted otherwise. `HEAD` answers with the same status and headers.',
      tags: ['plants'],
      security: READ_SECURITY,
      querystring: PlantListQuery,
      headers: Type.Object({
        prefer: Type.Optional(Type.String({
          description: '`count=exact` (RFC 7240) to have the matching plants counted in `X-Total-Count`; other preferences are ignored',
          examples: ['count=exact']
        }))
      }),
      response: {
        200: {
          ...StoredPlantPage,
          description: 'A page of plants, possibly empty',
          headers: {
            Link: {
              type: 'string',
              description: 'RFC 8288 link to the next page, every parameter given kept: `</plants?limit=N&after=ID>; rel="next"` ' +
                'in an id order, `</plants?limit=N&sort=name&cursor=C>; rel="next"` in a name order'
            },
            'X-Total-Count': { type: 'string', description: 'With `Prefer: count=exact`: how many plants match `tag` and `q`, on all pages' },
            'Preference-Applied': { type: 'string', description: '`count=exact` when the plants were counted' },
            Vary: { type: 'string', description: '`Prefer`: the answer depends on it' }
          }
        },
        ...authenticatedOperationErrors
      }
    }
  }, async (request, reply) => {
    const { query } = request
    const listing = listingOf(query, prefersExactCount(request.headers.prefer))
    request.plantListing = listing
    const { page, total } = await readListing(store, listing)
    const vary = reply.getHeader('vary')
    reply.header('vary', vary === undefined ? 'Prefer' : `${String(vary)}, Prefer`)
    if (total !== undefined) reply.header('x-total-count', String(total)).header('preference-applied', 'count=exact')
    const next = nextPageLink(listing, page)
    if (next !== undefined) reply.header('link', `<${next}>; rel="next"`)
    return sendJsonDocument(reply, page.json)
  })

  plants.get('/:id', {
    schema: {
      operationId: 'getPlant',
      summary: 'Read a plant',
      description: 'The plant with this id, and its `ETag`. With `If-None-Match` naming that ETag the answer ' +
        'is a 304 without a body: the copy the client holds is current.',
      tags: ['plants'],
      security: READ_SECURITY,
      params: PlantIdParams,
      headers: Type.Object({
        'if-none-match': Type.Optional(Type.String({ description: 'The ETags of copies the client holds: 304 when the plant still has one of them' })),
        'if-match': Type.Optional(Type.String({ description: 'Answer only while the plant\'s ETag is one of these; otherwise 412' }))
      }),
      response: {
        200: { ...ref(StoredPlant), description: 'The plant', headers: ETAG },
        304: { type: 'null', description: 'The plant still has an ETag the If-None-Match names', headers: ETAG },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        404: errorResponses[404],
        412: errorResponses[412]
      }
    }
  }, async (request, reply) => {
    const id = BigInt(request.params.id)
    const preconditions = preconditionsOf(request)
    const plant = await store.get(id)
    if (plant === undefined) throw plantNotFound(id)
    const entityTag = entityTagOf(plant)
    reply.header('etag', entityTag)
    if (preconditions !== undefined && !preconditions.holdFor(entityTag)) {
      if (preconditions.ifMatch !== undefined && !matchesStrongly(preconditions.ifMatch, entityTag)) throw preconditionFailed(id, true)
      return reply.code(304).send()
    }
    return sendJsonDocument(reply, plant)
  })

  plants.put('/:id', {
    schema: {
      operationId: 'replacePlant',
      summary: 'Create or replace a plant',
      description: 'Stores the plant under this id whole: a tag absent from the body is absent afterwards. ' +
        'Creates it (201) when the id is free, replaces it (200) otherwise; the answer is sent once the write ' +
        'is durably committed. With `If-Match` it replaces only that version of the plant; with ' +
        '`If-None-Match: *` it only creates.',
      tags: ['plants'],
      security: WRITE_SECURITY,
      params: PlantIdParams,
      headers: Type.Object({
        ...IF_MATCH,
        'if-none-match': Type.Optional(Type.String({ description: '`*` to create only: 412 when the plant exists' }))
      }),
      body: ref(PlantReplacement),
      response: {
        200: { ...ref(StoredPlant), description: 'The plant was replaced', headers: ETAG },
        201: { ...ref(StoredPlant), description: 'The plant was created', headers: { ...LOCATION, ...ETAG } },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        ...bodyErrors,
        412: errorResponses[412]
      }
    }
  }, async (request, reply) => {
    const id = pathIdMatchingBody(request.params.id, request.body.id)
    const plant = plantRecord(id, request.body.name, request.body.tag)
    const outcome = await writeIfPreconditionsHold(request, id, (expected) => store.put(plant, expected, writerOf(request)))
    if (outcome.status === 'created') reply.code(201).header('location', `/plants/${id}`)
    return sendPlant(reply, outcome.plant)
  })

  await app.register(async function mergePatchRoutes (scope) {
    acceptJsonBodiesAs(scope, MERGE_PATCH_MEDIA_TYPE)
    scope.withTypeProvider<TypeBoxTypeProvider>().patch('/:id', {
      config: { bodyMediaType: MERGE_PATCH_MEDIA_TYPE },
      schema: {
        operationId: 'updatePlant',
        summary: 'Change some fields of a plant',
        description: 'Applies a JSON merge patch (RFC 7396, `Content-Type: application/merge-patch+json`): a `name` ' +
          'renames the plant, a `tag` sets its tag, `"tag": null` removes it. The answer is sent once the change is ' +
          'durably committed. With `If-Match` it changes only that version of the plant.',
        tags: ['plants'],
        security: WRITE_SECURITY,
        params: PlantIdParams,
        headers: Type.Object(IF_MATCH),
        body: ref(PlantPatch),
        consumes: [MERGE_PATCH_MEDIA_TYPE],
        response: {
          200: { ...ref(StoredPlant), description: 'The plant as it is after the patch', headers: ETAG },
          ...authenticatedOperationErrors,
          ...pathParameterErrors,
          ...bodyErrors,
          404: errorResponses[404],
          412: errorResponses[412]
        }
      }
    }, async (request, reply) => {
      const { body } = request
      const id = pathIdMatchingBody(request.params.id, body.id)
      const patch = {
        ...(body.name === undefined ? {} : { name: body.name }),
        ...(body.tag === undefined ? {} : { tag: body.tag })
      }
      const outcome = await writeIfPreconditionsHold(request, id, (expected) => store.patch(id, patch, expected, writerOf(request)))
      if (outcome.status === 'not-found') throw plantNotFound(id)
      return sendPlant(reply, outcome.plant)
    })
  })

  plants.delete('/:id', {
    schema: {
      operationId: 'deletePlant',
      summary: 'Delete a plant',
      description: 'Removes the plant; the answer is sent once the delete is durably committed. The id ' +
        'is free again afterwards: a later create with it, even with the old name and tag, makes a new plant. ' +
        'With `If-Match` it deletes only that version of the plant.',
      tags: ['plants'],
      security: WRITE_SECURITY,
      params: PlantIdParams,
      headers: Type.Object(IF_MATCH),
      response: {
        204: { type: 'null', description: 'The plant was deleted' },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        ...bodyErrors,
        404: errorResponses[404],
        412: errorResponses[412]
      }
    }
  }, async (request, reply) => {
    const id = BigInt(request.params.id)
    const outcome = await writeIfPreconditionsHold(request, id, (expected) => store.delete(id, expected, writerOf(request)))
    if (outcome.status === 'not-found') throw plantNotFound(id)
    return reply.code(204).send()
  })
}

async function readRecord (store: PlantStore, id: bigint): Promise<PlantRecord | undefined> {
  const json = await store.get(id)
  if (json === undefined) return undefined
  const { name, tag } = JSON.parse(json) as { name: string, tag?: string }
  return plantRecord(id, name, tag)
}

/** The path's id, once an id member in the body (allowed only when equal) is checked against it. */
function pathIdMatchingBody (pathId: string, bodyId: number | bigint | undefined): bigint {
  const id = BigInt(pathId)
  if (bodyId !== undefined && BigInt(bodyId) !== id) throw plantIdMismatch(id, BigInt(bodyId))
  return id
}

/** Answers with the plant's JSON document and its ETag. */
function sendPlant (reply: FastifyReply, plant: PlantRecord): FastifyReply {
  const json = plantJson(plant.id, plant.name, plant.tag)
  return sendJsonDocument(reply.header('etag', entityTagOf(json)), json)
}

/**
 * Sends a JSON document the store built (see `PlantJson`) as it is: Fastify serializes only what is not
 * already text. Its shape is the route's response schema, which the store contract tests hold every
 * backend to.
 */
function sendJsonDocument (reply: FastifyReply, json: PlantJson | string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json)
}
