import { outcomeOfMeeting, type CreateOutcome, type PlantRecord, type PlantStore } from './plant-store.js'

/** Keeps plants in memory: for tests and throwaway runs (`DATABASE_URL=memory:`); nothing survives a restart. */
export function openMemoryStore (): PlantStore {
  const plants = new Map<bigint, PlantRecord>()
  /** Every id, ascending, for keyset pages. */
  const sortedIds: bigint[] = []
  let generatedTokenDigest: Buffer | undefined

  /** The index of the first id greater than `id` (or of `id` itself, when `inclusive`). */
  function positionAfter (id: bigint, inclusive = false): number {
    let low = 0
    let high = sortedIds.length
    while (low < high) {
      const middle = (low + high) >>> 1
      const candidate = sortedIds[middle] as bigint
      if (candidate < id || (!inclusive && candidate === id)) low = middle + 1
      else high = middle
    }
    return low
  }

  return {
    backend: 'memory',
    async create (plant): Promise<CreateOutcome> {
      const existing = plants.get(plant.id)
      if (existing === undefined) {
        plants.set(plant.id, plant)
        const last = sortedIds.at(-1)
        if (last === undefined || plant.id > last) sortedIds.push(plant.id)
        else sortedIds.splice(positionAfter(plant.id), 0, plant.id)
        return { status: 'created', plant }
      }
      return outcomeOfMeeting(existing, plant)
    },
    async get (id) {
      return plants.get(id)
    },
    async list ({ after, limit }) {
      const start = after === undefined ? 0 : positionAfter(after)
      return sortedIds.slice(start, start + limit).map((id) => plants.get(id) as PlantRecord)
    },
    async delete (id) {
      if (!plants.delete(id)) return false
      sortedIds.splice(positionAfter(id, true), 1)
      return true
    },
    async ensureGeneratedTokenDigest (digest) {
      generatedTokenDigest ??= digest
      return generatedTokenDigest
    },
    async ping () {},
    async close () {}
  }
}
