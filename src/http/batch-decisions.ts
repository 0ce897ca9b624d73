import { invalidRequest, plantIdConflict, plantIdMismatch, plantNotFound, preconditionFailed, PlantstoreError } from '../errors.js'
import type { BatchOperation } from '../schemas/batch.js'
import { batchOperationViolation } from '../schemas/violations.js'
import { plantJson } from '../store/plant-document.js'
import { outcomeOfMeeting, plantRecord, sameState, type PlantPatchRecord, type PlantRecord } from '../store/plant-store.js'
import { decideChange, type PlannedChange, type WritePlan } from '../store/write-operations.js'
import { entityTagOf } from './entity-tags.js'
import { preconditionsFrom, type Preconditions } from './preconditions.js'

/** A batch's operation, read: what its single request would write, and under which preconditions. */
export type PlannedOperation =
  | { readonly method: 'POST', readonly plant: PlantRecord }
  | { readonly method: 'PUT', readonly plant: PlantRecord, readonly preconditions: Preconditions | undefined }
  | { readonly method: 'PATCH', readonly id: bigint, readonly patch: PlantPatchRecord, readonly preconditions: Preconditions | undefined }
  | { readonly method: 'DELETE', readonly id: bigint, readonly preconditions: Preconditions | undefined }

/** What an applied operation answers: its single request's status, and the plant after it (none for a DELETE). */
export interface OperationResult {
  readonly status: 200 | 201 | 204
  readonly plant?: PlantRecord
}

/** `operations[i]: ` and the message of the error its single request would have answered, with its status. */
export function operationError (index: number, error: PlantstoreError): PlantstoreError {
  return new PlantstoreError(error.statusCode, `operations[${index}]: ${error.message}`, error.headers)
}

/**
 * Reads an operation that keeps its single request's rules (batchOperationViolation). What only the
 * combination of its members can break is checked here: an `id` in a PUT's or PATCH's body must be
 * the operation's, and its preconditions must be entity tags. Throws the 400 naming the operation.
 */
function plannedOperation (operation: BatchOperation, index: number): PlannedOperation {
  try {
    const preconditions = preconditionsFrom(operation.ifMatch, operation.ifNoneMatch, { ifMatch: 'ifMatch', ifNoneMatch: 'ifNoneMatch' })
    const body = operation.body ?? {}
    switch (operation.method) {
      case 'POST':
        return { method: 'POST', plant: plantRecord(BigInt(body.id as number | bigint), body.name as string, body.tag as string | undefined) }
      case 'PUT': {
        const id = operationId(operation)
        return { method: 'PUT', plant: plantRecord(id, body.name as string, body.tag as string | undefined), preconditions }
      }
      case 'PATCH': {
        const id = operationId(operation)
        const patch = { ...(body.name === undefined ? {} : { name: body.name as string }), ...(body.tag === undefined ? {} : { tag: body.tag as string | null }) }
        return { method: 'PATCH', id, patch, preconditions }
      }
      case 'DELETE':
        return { method: 'DELETE', id: BigInt(operation.id as number | bigint), preconditions }
    }
  } catch (error) {
    throw error instanceof PlantstoreError ? operationError(index, error) : error
  }
}

/** A PUT's or PATCH's id, once an `id` in its body (allowed only when equal) is checked against it. */
function operationId (operation: BatchOperation): bigint {
  const id = BigInt(operation.id as number | bigint)
  const bodyId = operation.body?.id as number | bigint | undefined
  if (bodyId !== undefined && BigInt(bodyId) !== id) throw plantIdMismatch(id, BigInt(bodyId))
  return id
}

/**
 * The batch's operations read in order, up to the first that breaks its single request's rules: the ones
 * before it, and its 400 (undefined when none does). Those before it may still fail on the plants they
 * meet, and then fail first.
 */
export function plannedOperations (operations: readonly BatchOperation[]): { readonly planned: PlannedOperation[], readonly malformed?: PlantstoreError } {
  const planned: PlannedOperation[] = []
  for (const [index, operation] of operations.entries()) {
    const violation = batchOperationViolation(operation)
    if (violation !== undefined) return { planned, malformed: invalidRequest(`operations[${index}]: ${violation}`) }
    try {
      planned.push(plannedOperation(operation, index))
    } catch (error) {
      if (!(error instanceof PlantstoreError)) throw error
      return { planned, malformed: error }
    }
  }
  return { planned }
}

export function plannedId (operation: PlannedOperation): bigint {
  return operation.method === 'POST' || operation.method === 'PUT' ? operation.plant.id : operation.id
}

/**
 * The batch decided on the plants its ids hold now (`current`): the operations taken in order, each with
 * its single request's rules, on the plants as the ones before it left them. Either the first operation
 * that fails, with its single request's error named after it, or every operation's result and the plan
 * that writes them: the plants expected now, and each change that a write makes, in order (a replayed
 * POST, and a PUT or PATCH that changes nothing, make none).
 */
export function decideBatch (
  operations: readonly PlannedOperation[],
  current: ReadonlyMap<bigint, PlantRecord | undefined>
): { readonly failure: PlantstoreError } | { readonly results: OperationResult[], readonly plan: WritePlan } {
  const plants = new Map(current)
  const results: OperationResult[] = []
  const changes: PlannedChange[] = []
  for (const [index, operation] of operations.entries()) {
    const id = plannedId(operation)
    const before = plants.get(id)
    const decided = decideOperation(operation, before)
    if (decided instanceof PlantstoreError) return { failure: operationError(index, decided) }
    results.push(decided.result)
    if (!sameState(before, decided.after)) {
      changes.push({ id, before, after: decided.after })
      plants.set(id, decided.after)
    }
  }
  return { results, plan: { expected: current, changes } }
}

/** One operation on the plant its id holds: its result and the plant after it, or its single request's error. */
function decideOperation (operation: PlannedOperation, before: PlantRecord | undefined): { result: OperationResult, after: PlantRecord | undefined } | PlantstoreError {
  if (operation.method === 'POST') {
    if (before === undefined) return { result: { status: 200, plant: operation.plant }, after: operation.plant }
    const met = outcomeOfMeeting(before, operation.plant)
    return met.status === 'replayed' ? { result: { status: 200, plant: before }, after: before } : plantIdConflict(operation.plant.id)
  }
  const id = plannedId(operation)
  const { preconditions } = operation
  if (preconditions !== undefined && !preconditions.holdFor(before === undefined ? undefined : entityTagOf(plantJson(before.id, before.name, before.tag)))) {
    return preconditionFailed(id, before !== undefined)
  }
  const change = operation.method === 'PUT'
    ? { kind: 'put' as const, plant: operation.plant }
    : operation.method === 'PATCH' ? { kind: 'patch' as const, id, patch: operation.patch } : { kind: 'delete' as const, id }
  const { outcome, after } = decideChange(change, before)
  switch (outcome.status) {
    case 'created': return { result: { status: 201, plant: outcome.plant }, after }
    case 'replaced':
    case 'patched': return { result: { status: 200, plant: outcome.plant }, after }
    case 'deleted': return { result: { status: 204 }, after }
    case 'not-found': return plantNotFound(id)
    // decideChange is given no expectation, so it never answers stale.
    case 'stale': throw new Error('a batch operation was decided as stale')
  }
}
