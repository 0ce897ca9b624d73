import { outcomeOfMeeting, pageOf, plantJson, type CreateOutcome, type PlantRecord, type PlantStore } from './plant-store.js'

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
      const plant = plants.get(id)
      return plant === undefined ? undefined : plantJson(plant.id, plant.name, plant.tag)
    },
    async list ({ after, limit }) {
      const start = after === undefined ? 0 : positionAfter(after)
      const ids = sortedIds.slice(start, start + limit + 1)
      const documents = ids.map((id) => {
        const plant = plants.get(id) as PlantRecord
        return plantJson(plant.id, plant.name, plant.tag)
      })
      return pageOf(documents, limit, (index) => ids[index] as bigint)
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
