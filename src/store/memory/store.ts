import { plantJson } from '../plant-document.js'
import { outcomeOfMeeting, pageOf, samePlant, type CreateOutcome, type PlantRecord, type PlantStore } from '../plant-store.js'
import { decideChange, idOf, type ChangeOperation, type WriteResult } from '../write-operations.js'
import { SortedIds } from './sorted-ids.js'
import { memoryTokenStore } from './tokens.js'
import { MemoryWebhookStore } from './webhooks.js'

/** Keeps plants in memory: for tests and throwaway runs (`DATABASE_URL=memory:`); nothing survives a restart. */
export function openMemoryStore (): PlantStore {
  const plants = new Map<bigint, PlantRecord>()
  const allIds = new SortedIds()
  /** The ids of the plants with each tag: the index a filtered page reads. */
  const idsByTag = new Map<string, SortedIds>()

  const webhooks = new MemoryWebhookStore()

  /**
   * Makes `plant` (undefined: none) the plant stored in place of `current`, keeping the indexes in step,
   * and records the change's event.
   */
  function replace (current: PlantRecord | undefined, plant: PlantRecord | undefined): void {
    if (current !== undefined && plant !== undefined && samePlant(current, plant)) return
    webhooks.recordChange(current, plant)
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
    async list (request) {
      const { after, limit, tag } = request
      const ids = (tag === undefined ? allIds : idsByTag.get(tag) ?? new SortedIds()).page(after, limit + 1)
      const documents = ids.map((id) => {
        const plant = plants.get(id) as PlantRecord
        return plantJson(plant.id, plant.name, plant.tag)
      })
      return pageOf(documents, request, (index) => ids[index] as bigint)
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
    webhooks,
    async ping () {},
    async checkWritable () {},
    // Writes apply at once, one by one: there are no batches to report.
    observe () {},
    async close () {}
  }
}
