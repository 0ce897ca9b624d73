import { Kind, Type, TypeRegistry, type Static } from '@sinclair/typebox'
import { component, Int64, ref } from './kinds.js'
import { NewPlant, PlantPatch, PlantReplacement, StoredPlant } from './plants.js'
import { BATCH_METHODS, batchOperationShapeViolation } from './violations.js'

/** The most operations one batch holds. */
export const MAX_BATCH_OPERATIONS = 1000

// The schema refuses only what is no operation (a body that is not a batch); the route holds each operation
// to its single request's rules in order (batchOperationViolation), so an earlier operation's failure comes first.
TypeRegistry.Set('BatchOperation', (_schema, value) => batchOperationShapeViolation(value) === undefined)

const precondition = (header: string, meaning: string) => Type.Optional(Type.String({
  description: `The operation's \`${header}\`, as its single request would send it: ${meaning}`,
  examples: ['"e4yC73Ox0hT2dYCpHWIX3KslTpS"']
}))
const ifMatch = precondition('If-Match', 'it applies only while the plant has one of these ETags (`*`: while it exists), otherwise 412')
const ifNoneMatch = precondition('If-None-Match', '`*` to create only (412 when the plant exists)')
const operationId = Int64('The id of the plant the operation writes')

export const BatchPost = Type.Object({ method: Type.Literal('POST'), body: ref(NewPlant) },
  component('BatchPost', 'A `POST /plants` in a batch: its body creates a plant, or replays an identical one.'))
export const BatchPut = Type.Object({ method: Type.Literal('PUT'), id: operationId, body: ref(PlantReplacement), ifMatch, ifNoneMatch },
  component('BatchPut', 'A `PUT /plants/{id}` in a batch: creates or replaces the plant with this id whole.'))
export const BatchPatch = Type.Object({ method: Type.Literal('PATCH'), id: operationId, body: ref(PlantPatch), ifMatch, ifNoneMatch },
  component('BatchPatch', 'A `PATCH /plants/{id}` in a batch: its body is a JSON merge patch of the plant.'))
export const BatchDelete = Type.Object({ method: Type.Literal('DELETE'), id: operationId, ifMatch, ifNoneMatch },
  component('BatchDelete', 'A `DELETE /plants/{id}` in a batch.'))

const forms = { POST: BatchPost, PUT: BatchPut, PATCH: BatchPatch, DELETE: BatchDelete }

/** One operation, as OpenAPI shows it: the four forms, told apart by `method`. The service checks them with the rules of each single request. */
const BatchOperation = Type.Unsafe<BatchOperation>({
  [Kind]: 'BatchOperation',
  description: 'One write, with the rules of its single request: `POST /plants`, `PUT`, `PATCH` (a merge patch) or `DELETE /plants/{id}`',
  oneOf: Object.values(forms).map((form) => ref(form)),
  discriminator: {
    propertyName: 'method',
    mapping: Object.fromEntries(Object.entries(forms).map(([method, form]) => [method, `#/components/schemas/${form.$id}`]))
  }
})
export interface BatchOperation {
  readonly method: typeof BATCH_METHODS[number]
  readonly id?: number | bigint
  readonly body?: Record<string, unknown>
  readonly ifMatch?: string
  readonly ifNoneMatch?: string
}

export const BatchRequest = Type.Object({
  operations: Type.Array(BatchOperation, {
    minItems: 1,
    maxItems: MAX_BATCH_OPERATIONS,
    description: `1 to ${MAX_BATCH_OPERATIONS} writes, applied in this order, all of them or none`
  })
}, component('BatchRequest', 'Writes to apply in one transaction. Unknown properties are accepted and ignored.', {
  examples: [{
    operations: [
      { method: 'POST', body: { id: 1, name: 'Fern' } },
      { method: 'PUT', id: 2, body: { name: 'Moss', tag: 'shade' }, ifNoneMatch: '*' },
      { method: 'PATCH', id: 3, body: { tag: null } },
      { method: 'DELETE', id: 4 }
    ]
  }]
}))
export type BatchRequest = Static<typeof BatchRequest>

export const BatchResult = Type.Object({
  status: Type.Integer({ format: 'int32', description: 'The status the operation\'s single request would have had: 200, 201 or 204', examples: [200] }),
  plant: Type.Optional(ref(StoredPlant)),
  etag: Type.Optional(Type.String({ description: 'The plant\'s ETag after the operation', examples: ['"e4yC73Ox0hT2dYCpHWIX3KslTpS"'] }))
}, component('BatchResult', 'What one operation did: its status, and the plant after it with its ETag (neither for a DELETE).'))

export const BatchResults = Type.Object({
  results: Type.Array(ref(BatchResult), { description: 'One result per operation, in order' })
}, component('BatchResults', 'Every operation of the batch was applied, in one transaction.'))
