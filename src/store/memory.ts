import { samePlant, type CreateOutcome, type PlantRecord, type PlantStore } from './plant-store.js'

/** Keeps plants in a Map: for tests and throwaway runs (`DATABASE_URL=memory:`); nothing survives a restart. */
export function openMemoryStore (): PlantStore {
  const plants = new Map<bigint, PlantRecord>()
  let generatedTokenDigest: Buffer | undefined

  return {
    backend: 'memory',
    async create (plant): Promise<CreateOutcome> {
      const existing = plants.get(plant.id)
      if (existing === undefined) {
        plants.set(plant.id, plant)
        return { status: 'created', plant }
      }
      return samePlant(existing, plant)
        ? { status: 'replayed', plant: existing }
        : { status: 'conflict', existing }
    },
    async ensureGeneratedTokenDigest (digest) {
      generatedTokenDigest ??= digest
      return generatedTokenDigest
    },
    async ping () {},
    async close () {}
  }
}
