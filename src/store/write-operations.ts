import { plantRecord, samePlant, sameState, type PlantRecord } from './plant-record.js'

export type CreateOutcome =
  /** The plant did not exist and is now durably committed. */
  | { readonly status: 'created', readonly plant: PlantRecord }
  /** The same id, name and tag were already stored (a client retry); nothing changed. */
  | { readonly status: 'replayed', readonly plant: PlantRecord }
  /** The id is taken by a plant with another name or tag, which `existing` holds; nothing changed. */
  | { readonly status: 'conflict', readonly existing: PlantRecord }

/**
 * The plant a conditional write was decided on (its HTTP preconditions were checked against it): the
 * write takes effect only while the store still holds exactly this plant, or no plant with the id when
 * `plant` is undefined. Otherwise the write answers `stale` with what the store holds now.
 */
export interface Expectation { readonly plant: PlantRecord | undefined }

/** A merge patch (RFC 7396) of a plant: a given name replaces the name; a tag replaces it, `null` removes it. */
export interface PlantPatchRecord {
  readonly name?: string
  readonly tag?: string | null
}

/** The store no longer holds the plant a conditional write expected; nothing changed. */
export interface Stale { readonly status: 'stale', readonly current: PlantRecord | undefined }

export type PutOutcome =
  | { readonly status: 'created' | 'replaced', readonly plant: PlantRecord }
  | Stale

export type PatchOutcome =
  | { readonly status: 'patched', readonly plant: PlantRecord }
  | { readonly status: 'not-found' }
  | Stale

export type DeleteOutcome = { readonly status: 'deleted' | 'not-found' } | Stale

/** What a create that met a stored plant with its id answers: a replay of the same plant, or a conflict. */
export function outcomeOfMeeting (stored: PlantRecord, plant: PlantRecord): CreateOutcome {
  return samePlant(stored, plant) ? { status: 'replayed', plant: stored } : { status: 'conflict', existing: stored }
}

/**
 * A write as the store commits it: a create (`POST`), a change of one plant that may be conditional, or a
 * plan of many changes (a batch) that takes effect whole or not at all.
 */
export type WriteOperation = CreateOperation | ChangeOperation | PlanOperation
export interface CreateOperation { readonly kind: 'create', readonly plant: PlantRecord, readonly by?: string | undefined }
export interface PlanOperation { readonly kind: 'plan', readonly plan: WritePlan, readonly by?: string | undefined }

/**
 * Changes decided together (a batch of requests), written in one transaction only while every id of
 * `expected` still holds the plant given there (undefined: no plant): a compare-and-set of many plants.
 * `changes` are in the order they take effect, one per write that changed a plant; an id may change
 * more than once, and its last change is what stays. Each change records its events in that order.
 */
export interface WritePlan {
  readonly expected: ReadonlyMap<bigint, PlantRecord | undefined>
  readonly changes: readonly PlannedChange[]
}

/** One change of a plan: the plant before it and after it (undefined: none, so a create or a delete). */
export interface PlannedChange {
  readonly id: bigint
  readonly before: PlantRecord | undefined
  readonly after: PlantRecord | undefined
}

/** A plan was written; or an id of it no longer held what was expected, and nothing was. */
export type PlanOutcome = { readonly status: 'written' } | { readonly status: 'stale' }
/** `by` on every write: who made it, recorded in its change (UNNAMED_WRITER when not given). */
export type ChangeOperation =
  | { readonly kind: 'put', readonly plant: PlantRecord, readonly expected?: Expectation | undefined, readonly by?: string | undefined }
  | { readonly kind: 'patch', readonly id: bigint, readonly patch: PlantPatchRecord, readonly expected?: Expectation | undefined, readonly by?: string | undefined }
  | { readonly kind: 'delete', readonly id: bigint, readonly expected?: Expectation | undefined, readonly by?: string | undefined }

export type ChangeOutcome = PutOutcome | PatchOutcome | DeleteOutcome
export type WriteOutcome = CreateOutcome | ChangeOutcome | PlanOutcome

export type WriteResult<Operation extends WriteOperation> =
  Operation extends { kind: 'create' } ? CreateOutcome
    : Operation extends { kind: 'put' } ? PutOutcome
      : Operation extends { kind: 'patch' } ? PatchOutcome
        : Operation extends { kind: 'plan' } ? PlanOutcome
          : DeleteOutcome

/** The id of a write of one plant. */
export function idOf (operation: CreateOperation | ChangeOperation): bigint {
  return operation.kind === 'create' || operation.kind === 'put' ? operation.plant.id : operation.id
}

/** The ids a write touches: one, or a plan's. */
export function idsOf (operation: WriteOperation): Iterable<bigint> {
  return operation.kind === 'plan' ? operation.plan.expected.keys() : [idOf(operation)]
}

/** How much a write weighs in a transaction's size: one, or a plan's changes (at least one). */
export function weightOf (operation: WriteOperation): number {
  return operation.kind === 'plan' ? Math.max(1, operation.plan.changes.length) : 1
}

/** The event a change is: a plant created, updated or deleted. */
export function changeTypeOf (change: PlannedChange): 'plant.created' | 'plant.updated' | 'plant.deleted' {
  return change.before === undefined ? 'plant.created' : change.after === undefined ? 'plant.deleted' : 'plant.updated'
}

/** What a change does to the plant its id names: its outcome, and the plant stored afterwards (undefined: none). */
export interface ChangeDecision {
  readonly outcome: ChangeOutcome
  readonly after: PlantRecord | undefined
}

/**
 * The rules of every change, given the plant the store holds under its id (locked, or otherwise safe
 * from other writers, while the decision is applied). The memory and PostgreSQL adapters apply the
 * decision; the SQLite writer thread applies the same rules to its rows (sqlite/writer-plants.ts), and the
 * store contract holds all three to the same outcomes.
 */
export function decideChange (change: ChangeOperation, current: PlantRecord | undefined): ChangeDecision {
  if (change.expected !== undefined && !sameState(change.expected.plant, current)) {
    return { outcome: { status: 'stale', current }, after: current }
  }
  switch (change.kind) {
    case 'put':
      return { outcome: { status: current === undefined ? 'created' : 'replaced', plant: change.plant }, after: change.plant }
    case 'patch': {
      if (current === undefined) return { outcome: { status: 'not-found' }, after: undefined }
      const plant = patched(current, change.patch)
      return { outcome: { status: 'patched', plant }, after: plant }
    }
    case 'delete':
      return { outcome: { status: current === undefined ? 'not-found' : 'deleted' }, after: undefined }
  }
}

function patched (plant: PlantRecord, patch: PlantPatchRecord): PlantRecord {
  return plantRecord(plant.id, patch.name ?? plant.name, patch.tag === undefined ? plant.tag : patch.tag)
}
