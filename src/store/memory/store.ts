import { plantJson } from '../plant-document.js'
import { compareNames, foldName } from '../plant-names.js'
import {
  isNameOrder, outcomeOfMeeting, pageOf, samePlant, sameState, type CreateOutcome, type NamePosition, type PlantFilter, type PlantRecord, type PlantStore
} from '../plant-store.js'
import { decideChange, idOf, type ChangeOperation, type WriteResult } from '../write-operations.js'
import { SortedIds } from './sorted-ids.js'
import { memoryTokenStore } from './tokens.js'
import { MemoryWebhookStore } from './webhooks.js'
import { MemoryChangeLog } from './changes.js'
import { UNNAMED_WRITER } from '../change-log.js'

/** Keeps plants in memory: for tests and throwaway runs (`DATABASE_URL=memory:`); nothing survives a restart. */
export function openMemoryStore (): PlantStore {
  const plants = new Map<bigint, PlantRecord>()
  const allIds = new SortedIds()
  /** The ids of the plants with each tag: the index a filtered page reads. */
  const idsByTag = new Map<string, SortedIds>()
  /** Each plant's folded name, which a search reads. */
  const foldedNames = new Map<bigint, string>()

  const webhooks = new MemoryWebhookStore()
  const changes = new MemoryChangeLog()

  /**
   * Makes `plant` (undefined: none) the plant stored in place of `current`, keeping the indexes in step,
   * and records the change and its event, made `by` whom.
   */
  function replace (current: PlantRecord | undefined, plant: PlantRecord | undefined, by = UNNAMED_WRITER): void {
    if (current !== undefined && plant !== undefined && samePlant(current, plant)) return
    if (current === undefined && plant === undefined) return
    webhooks.recordChange(current, plant)
    changes.record([{ id: (plant ?? current as PlantRecord).id, tagBefore: current?.tag ?? null, created: current === undefined, after: plant, by }])
    const retagged = current?.tag !== plant?.tag || current === undefined || plant === undefined
    if (retagged && current?.tag !== undefined) {
      const tagged = idsByTag.get(current.tag) as SortedIds
      tagged.remove(current.id)
      if (tagged.size === 0) idsByTag.delete(current.tag)
    }
    if (plant === undefined) {
      if (current !== undefined) {
        plants.delete(current.id)
        foldedNames.delete(current.id)
        allIds.remove(current.id)
      }
      return
    }
    plants.set(plant.id, plant)
    if (current?.name !== plant.name) foldedNames.set(plant.id, foldName(plant.name))
    if (current === undefined) allIds.insert(plant.id)
    if (retagged && plant.tag !== undefined) {
      let tagged = idsByTag.get(plant.tag)
      if (tagged === undefined) idsByTag.set(plant.tag, tagged = new SortedIds())
      tagged.insert(plant.id)
    }
  }

  /** Whether a plant passes the filter's search; undefined when there is none. */
  function matcher ({ q }: PlantFilter): ((id: bigint) => boolean) | undefined {
    if (q === undefined) return undefined
    const folded = foldName(q)
    return (id) => (foldedNames.get(id) as string).includes(folded)
  }

  /** Name order, ties by id. */
  function byName (a: bigint, b: bigint): number {
    return compareNames((plants.get(a) as PlantRecord).name, (plants.get(b) as PlantRecord).name) || (a < b ? -1 : a > b ? 1 : 0)
  }

  /** Whether the plant `id` comes after `position` in the name order (its reverse when `descending`). */
  function follows (id: bigint, position: NamePosition, descending: boolean): boolean {
    const order = compareNames((plants.get(id) as PlantRecord).name, position.name) || (id < position.id ? -1 : id > position.id ? 1 : 0)
    return descending ? order < 0 : order > 0
  }

  function change<Operation extends ChangeOperation> (operation: Operation): Promise<WriteResult<Operation>> {
    const current = plants.get(idOf(operation))
    const { outcome, after } = decideChange(operation, current)
    replace(current, after, operation.by)
    return Promise.resolve(outcome as WriteResult<Operation>)
  }

  return {
    backend: 'memory',
    async create (plant, by): Promise<CreateOutcome> {
      const existing = plants.get(plant.id)
      if (existing !== undefined) return outcomeOfMeeting(existing, plant)
      replace(undefined, plant, by)
      return { status: 'created', plant }
    },
    async get (id) {
      const plant = plants.get(id)
      return plant === undefined ? undefined : plantJson(plant.id, plant.name, plant.tag)
    },
    async list (request) {
      const { limit } = request
      const candidates = request.tag === undefined ? allIds : idsByTag.get(request.tag)
      const accept = matcher(request)
      let ids: readonly bigint[]
      if (candidates === undefined) {
        ids = []
      } else if (isNameOrder(request)) {
        const descending = request.order === '-name'
        const { after } = request
        const ordered = candidates.all().filter((id) => accept?.(id) !== false && (after === undefined || follows(id, after, descending)))
          .sort((a, b) => byName(a, b) * (descending ? -1 : 1))
        ids = ordered.slice(0, limit + 1)
      } else {
        ids = candidates.page(request.after, limit + 1, request.order === '-id', accept)
      }
      const documents = ids.map((id) => {
        const plant = plants.get(id) as PlantRecord
        return plantJson(plant.id, plant.name, plant.tag)
      })
      return pageOf(documents, request, (index) => ids[index] as bigint, (index) => (plants.get(ids[index] as bigint) as PlantRecord).name)
    },
    async count (filter) {
      const candidates = filter.tag === undefined ? allIds : idsByTag.get(filter.tag)
      if (candidates === undefined) return 0
      const accept = matcher(filter)
      return accept === undefined ? candidates.size : candidates.all().filter(accept).length
    },
    put (plant, expected, by) {
      return change({ kind: 'put', plant, expected, by })
    },
    patch (id, patch, expected, by) {
      return change({ kind: 'patch', id, patch, expected, by })
    },
    delete (id, expected, by) {
      return change({ kind: 'delete', id, expected, by })
    },
    async writePlan (plan, by) {
      for (const [id, expected] of plan.expected) if (!sameState(plants.get(id), expected)) return { status: 'stale' }
      for (const { id, after } of plan.changes) replace(plants.get(id), after, by)
      return { status: 'written' }
    },
    tokens: memoryTokenStore(),
    webhooks,
    changes,
    async ping () {},
    async checkWritable () {},
    // Writes apply at once, one by one: there are no batches to report.
    observe () {},
    async close () {}
  }
}
