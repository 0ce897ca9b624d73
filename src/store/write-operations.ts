import {
  plantRecord, sameState, type CreateOutcome, type DeleteOutcome, type Expectation, type PatchOutcome, type PlantPatchRecord,
  type PlantRecord, type PutOutcome
} from './plant-store.js'

/** A write as the store commits it: a create (`POST`), or a change of one plant that may be conditional. */
export type WriteOperation = CreateOperation | ChangeOperation
export interface CreateOperation { readonly kind: 'create', readonly plant: PlantRecord }
export type ChangeOperation =
  | { readonly kind: 'put', readonly plant: PlantRecord, readonly expected?: Expectation | undefined }
  | { readonly kind: 'patch', readonly id: bigint, readonly patch: PlantPatchRecord, readonly expected?: Expectation | undefined }
  | { readonly kind: 'delete', readonly id: bigint, readonly expected?: Expectation | undefined }

export type ChangeOutcome = PutOutcome | PatchOutcome | DeleteOutcome
export type WriteOutcome = CreateOutcome | ChangeOutcome

export type WriteResult<Operation extends WriteOperation> =
  Operation extends { kind: 'create' } ? CreateOutcome
    : Operation extends { kind: 'put' } ? PutOutcome
      : Operation extends { kind: 'patch' } ? PatchOutcome
        : DeleteOutcome

export function idOf (operation: WriteOperation): bigint {
  return operation.kind === 'create' || operation.kind === 'put' ? operation.plant.id : operation.id
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
