import type { BatchResult, Change, ChangeType, Plant, PlantChange } from './types.js'

/**
 * The service's answers as results: every int64 a bigint (the exact parser gives a number up to 2^53),
 * and only the members the API defines, so nothing else of a body reaches the caller's objects.
 */

type Members = Readonly<Record<string, unknown>>

function membersOf (value: unknown, what: string): Members {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError(`the service answered a ${what} that is not an object`)
  return value as Members
}

function int64Of (value: unknown, what: string): bigint {
  if (typeof value === 'bigint') return value
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value)
  throw new TypeError(`the service answered a ${what} that is not an integer`)
}

function stringOf (value: unknown, what: string): string {
  if (typeof value !== 'string') throw new TypeError(`the service answered a ${what} that is not a string`)
  return value
}

/** A plant from its JSON; `id` when the body has none (POST answers `{name, tag}`). */
export function plantOf (value: unknown, id?: bigint): Plant {
  const members = membersOf(value, 'plant')
  const plant: Plant = { id: id ?? int64Of(members.id, 'plant id'), name: stringOf(members.name, 'plant name') }
  if (members.tag !== undefined) plant.tag = stringOf(members.tag, 'plant tag')
  return plant
}

export function changeOf (value: unknown): Change {
  const members = membersOf(value, 'change')
  return {
    seq: int64Of(members.seq, 'change seq'),
    type: stringOf(members.type, 'change type') as ChangeType,
    id: int64Of(members.id, 'change id'),
    ...(members.plant === undefined ? {} : { plant: plantOf(members.plant) }),
    at: stringOf(members.at, 'change time')
  }
}

export function plantChangeOf (value: unknown): PlantChange {
  return { ...changeOf(value), by: stringOf(membersOf(value, 'change').by, 'change author') }
}

export function batchResultOf (value: unknown): BatchResult {
  const members = membersOf(value, 'batch result')
  const result: BatchResult = { status: Number(members.status) }
  if (members.plant !== undefined) result.plant = plantOf(members.plant)
  if (members.etag !== undefined) result.etag = stringOf(members.etag, 'batch ETag')
  return result
}

export function arrayOf (value: unknown, what: string): readonly unknown[] {
  if (!Array.isArray(value)) throw new TypeError(`the service answered ${what} that is not an array`)
  return value
}
