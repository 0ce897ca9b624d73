import { isLive, newestFirst, type AccessTokenStore, type VerifiableAccessToken } from './access-token-store.js'
import { outcomeOfMeeting, pageOf, plantJson, type CreateOutcome, type PlantRecord, type PlantStore } from './plant-store.js'

/** Keeps plants in memory: for tests and throwaway runs (`DATABASE_URL=memory:`); nothing survives a restart. */
export function openMemoryStore (): PlantStore {
  const plants = new Map<bigint, PlantRecord>()
  /** Every id, ascending, for keyset pages. */
  const sortedIds: bigint[] = []

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
    tokens: memoryTokenStore(),
    async ping () {},
    async close () {}
  }
}

function memoryTokenStore (): AccessTokenStore {
  const tokens = new Map<string, VerifiableAccessToken>()
  let revision = 0
  const withoutDigest = ({ digest: _digest, ...record }: VerifiableAccessToken) => record
  return {
    async list () {
      return [...tokens.values()].reverse().map(withoutDigest).sort(newestFirst)
    },
    async listVerifiable () {
      return [...tokens.values()].filter((token) => token.revokedAt === undefined)
    },
    async revision () {
      return String(revision)
    },
    async create (token) {
      for (const stored of tokens.values()) {
        if (stored.name === token.name && isLive(stored, token.createdAt)) return 'name-taken'
      }
      tokens.set(token.id, token)
      revision++
      return 'created'
    },
    async revoke (id, at) {
      const stored = tokens.get(id)
      if (stored === undefined) return undefined
      if (stored.revokedAt === undefined) {
        tokens.set(id, { ...stored, revokedAt: at })
        revision++
      }
      return withoutDigest(tokens.get(id) as VerifiableAccessToken)
    },
    async createInitialAdmin (token) {
      if (tokens.size > 0) return false
      tokens.set(token.id, token)
      revision++
      return true
    }
  }
}
