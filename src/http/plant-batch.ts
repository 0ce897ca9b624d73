import type { FastifyInstance, FastifyReply } from 'fastify'
import { writerOf } from '../auth/bearer.js'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { BatchRequest, BatchResults } from '../schemas/batch.js'
import { ref } from '../schemas/kinds.js'
import { plantJson } from '../store/plant-document.js'
import { plantRecord, type PlantRecord, type PlantStore } from '../store/plant-store.js'
import { batchKeptChanging } from '../errors.js'
import { bearerSecurity } from './docs.js'
import { entityTagOf } from './entity-tags.js'
import { jsonString } from '../json-text.js'
import { decideBatch, plannedId, plannedOperations, type OperationResult } from './batch-decisions.js'
import { answerUnmatched } from './method-not-allowed.js'
import { authenticatedOperationErrors, bodyErrors, errorResponses } from './responses.js'

export interface PlantBatchOptions {
  readonly store: PlantStore
  /** BATCH_BODY_LIMIT: the most bytes a batch's body may have (413 beyond). */
  readonly bodyLimit: number
}

/** A batch's operations, for its log line and metrics: how many of each method, and whether they were applied. */
export interface PlantBatchRecord {
  readonly operations: number
  readonly methods: Readonly<Record<string, number>>
  applied: boolean
}

/** How many times a batch is decided before its answer is a 503 (other writes changed its plants each time). */
const MAX_DECISIONS = 16

declare module 'fastify' {
  interface FastifyRequest {
    /** A batch's operations, for its log line and metrics; null on other requests. */
    plantBatch: PlantBatchRecord | null
  }
}

/**
 * `POST /plants/batch`, registered in the `/plants` scope (its authentication and scope guard): up to
 * 1000 writes with the rules of their single requests, decided together on the plants their ids hold
 * (batch-decisions.ts) and written by the store in one transaction as a compare-and-set of those plants.
 * When another write came first, the batch is decided again on what the store holds now.
 */
export async function plantBatchRoutes (app: FastifyInstance, options: PlantBatchOptions): Promise<void> {
  const { store } = options
  // `/plants/batch` is the batch, not the plant "batch" that `/plants/{id}` would take it for: 405, not 400.
  app.route({
    method: ['GET', 'PUT', 'PATCH', 'DELETE'],
    url: '/batch',
    config: { answersUnmatched: true },
    schema: { hide: true },
    handler: answerUnmatched
  })
  app.withTypeProvider<TypeBoxTypeProvider>().post('/batch', {
    bodyLimit: options.bodyLimit,
    schema: {
      operationId: 'batchPlants',
      summary: 'Apply up to 1000 writes in one transaction',
      description: 'Applies `POST`, `PUT`, `PATCH` and `DELETE` operations, each with the rules and preconditions ' +
        '(`ifMatch`, `ifNoneMatch`) of its single request, in order, all of them or none, in one durable transaction. ' +
        'Operations on one id see the earlier ones\' effect. When one fails, nothing is applied, and the answer is that ' +
        'operation\'s status with an `Error` whose message begins `operations[i]: `. The body may have up to ' +
        'BATCH_BODY_LIMIT bytes (1 MiB by default).',
      tags: ['plants'],
      security: bearerSecurity('plants:write'),
      body: ref(BatchRequest),
      response: {
        200: { ...ref(BatchResults), description: 'Every operation was applied; one result per operation, in order' },
        ...authenticatedOperationErrors,
        ...bodyErrors,
        404: errorResponses[404],
        409: errorResponses[409],
        412: errorResponses[412]
      }
    }
  }, async (request, reply) => {
    const { operations } = request.body
    const methods: Record<string, number> = {}
    for (const { method } of operations) methods[method] = (methods[method] ?? 0) + 1
    const record: PlantBatchRecord = { operations: operations.length, methods, applied: false }
    request.plantBatch = record
    const { planned, malformed } = plannedOperations(operations)
    const ids = [...new Set(planned.map(plannedId))]
    if (malformed !== undefined) {
      const before = planned.length === 0 ? undefined : decideBatch(planned, await currentPlants(store, ids))
      throw before !== undefined && 'failure' in before ? before.failure : malformed
    }
    // A batch of POSTs only, most often of new plants, is first decided as if none of its ids held a
    // plant, unread: the store's compare-and-set tells when one does. Then, as after any other write
    // that came first, the batch is decided on the plants its ids hold.
    let assumed = planned.every((operation) => operation.method === 'POST')
    let current = assumed ? new Map(ids.map((id) => [id, undefined])) : await currentPlants(store, ids)
    for (let decisions = 1; ; decisions++) {
      const decided = decideBatch(planned, current)
      if ('failure' in decided) {
        if (!assumed) throw decided.failure
      } else if ((await store.writePlan(decided.plan, writerOf(request))).status === 'written') {
        record.applied = true
        return sendJson(reply, resultsJson(decided.results))
      }
      // Each stale decision means another write was committed meanwhile; a batch that loses every time
      // is answered, not retried for ever.
      if (decisions === MAX_DECISIONS) throw batchKeptChanging(MAX_DECISIONS, request.id)
      current = await currentPlants(store, ids)
      assumed = false
    }
  })
}

/** Sends text that is already the answer's JSON: Fastify serializes only what is not text. */
function sendJson (reply: FastifyReply, json: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json)
}

/** The plants these ids hold now (undefined: none), read together. */
async function currentPlants (store: PlantStore, ids: readonly bigint[]): Promise<Map<bigint, PlantRecord | undefined>> {
  const documents = await Promise.all(ids.map((id) => store.get(id)))
  return new Map(ids.map((id, index) => {
    const document = documents[index]
    if (document === undefined) return [id, undefined]
    const { name, tag } = JSON.parse(document) as { name: string, tag?: string }
    return [id, plantRecord(id, name, tag)]
  }))
}

/** The answer: each result's status, and its plant and ETag, as text (ids exact). */
function resultsJson (results: readonly OperationResult[]): string {
  return `{"results":[${results.map(({ status, plant }) => {
    if (plant === undefined) return `{"status":${status}}`
    const document = plantJson(plant.id, plant.name, plant.tag)
    return `{"status":${status},"plant":${document},"etag":${jsonString(entityTagOf(document))}}`
  }).join(',')}]}`
}
