import { isLive, newestFirst, type AccessTokenStore, type VerifiableAccessToken } from './access-token-store.js'
import { outcomeOfMeeting, pageOf, plantJson, samePlant, type CreateOutcome, type PlantRecord, type PlantStore } from './plant-store.js'
import { decideChange, idOf, type ChangeOperation, type WriteResult } from './write-operations.js'

/** Keeps plants in memory: for tests and throwaway runs (`DATABASE_URL=memory:`); nothing survives a restart. */
export function openMemoryStore (): PlantStore {
  const plants = new Map<bigint, PlantRecord>()
  const allIds = new SortedIds()
  /** The ids of the plants with each tag: the index a filtered page reads. */
  const idsByTag = new Map<string, SortedIds>()

  /** Makes `plant` (undefined: none) the plant stored in place of `current`, keeping the indexes in step. */
  function replace (current: PlantRecord | undefined, plant: PlantRecord | undefined): void {
    if (current !== undefined && plant !== undefined && samePlant(current, plant)) return
    const retagged = current?.tag !== plant?.tag || current === undefined || plant === undefined
    if (retagged && current?.tag !== undefined) {
      const tagged = idsByTag.get(current.tag) as SortedIds
      tagged.remove(current.id)
      if (tagged.size === 0) idsByTag.delete(current.tag)
    }
    if (plant === undefined) {
      if (current !== undefined) {
        plants.delete(current.id)
        allIds.remove(current.id)
      }
      return
    }
    plants.set(plant.id, plant)
    if (current === undefined) allIds.insert(plant.id)
    if (retagged && plant.tag !== undefined) {
      let tagged = idsByTag.get(plant.tag)
      if (tagged === undefined) idsByTag.set(plant.tag, tagged = new SortedIds())
      tagged.insert(plant.id)
    }
  }

  function change<Operation extends ChangeOperation> (operation: Operation): Promise<WriteResult<Operation>> {
    const current = plants.get(idOf(operation))
    const { outcome, after } = decideChange(operation, current)
    replace(current, after)
    return Promise.resolve(outcome as WriteResult<Operation>)
  }

  return {
    backend: 'memory',
    async create (plant): Promise<CreateOutcome> {
      const existing = plants.get(plant.id)
      if (existing !== undefined) return outcomeOfMeeting(existing, plant)
      replace(undefined, plant)
      return { status: 'created', plant }
    },
    async get (id) {
      const plant = plants.get(id)
      return plant === undefined ? undefined : plantJson(plant.id, plant.name, plant.tag)
    },
    async list ({ after, limit, tag }) {
      const ids = (tag === undefined ? allIds : idsByTag.get(tag) ?? new SortedIds()).page(after, limit + 1)
      const documents = ids.map((id) => {
        const plant = plants.get(id) as PlantRecord
        return plantJson(plant.id, plant.name, plant.tag)
      })
      return pageOf(documents, limit, (index) => ids[index] as bigint)
    },
    put (plant, expected) {
      return change({ kind: 'put', plant, expected })
    },
    patch (id, patch, expected) {
      return change({ kind: 'patch', id, patch, expected })
    },
    delete (id, expected) {
      return change({ kind: 'delete', id, expected })
    },
    tokens: memoryTokenStore(),
    async ping () {},
    async close () {}
  }
}

/** Ids in ascending order, for keyset pages. */
class SortedIds {
  private readonly ids: bigint[] = []

  get size (): number {
    return this.ids.length
  }

  insert (id: bigint): void {
    const last = this.ids.at(-1)
    if (last === undefined || id > last) this.ids.push(id)
    else this.ids.splice(this.positionAfter(id), 0, id)
  }

  remove (id: bigint): void {
    this.ids.splice(this.positionAfter(id, true), 1)
  }

  /** Up to `count` ids greater than `after` (all from the smallest when it is undefined). */
  page (after: bigint | undefined, count: number): bigint[] {
    const start = after === undefined ? 0 : this.positionAfter(after)
    return this.ids.slice(start, start + count)
  }

  /** The index of the first id greater than `id` (or of `id` itself, when `inclusive`). */
  private positionAfter (id: bigint, inclusive = false): number {
    let low = 0
    let high = this.ids.length
    while (low < high) {
      const middle = (low + high) >>> 1
      const candidate = this.ids[middle] as bigint
      if (candidate < id || (!inclusive && candidate === id)) low = middle + 1
      else high = middle
    }
    return low
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
