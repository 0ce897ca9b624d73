import { describe, expect, it, onTestFinished } from 'vitest'
import type { ChangeRecord } from '../../src/store/change-log.js'
import { changeJson } from '../../src/store/change-document.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { backends } from '../helpers/app.js'

const fern = { id: 1n, name: 'Fern', tag: 'shade' }
const ivy = { id: 9223372036854775807n, name: 'Ivy' }

async function opened (open: () => Promise<PlantStore>): Promise<PlantStore> {
  const store = await open()
  onTestFinished(() => store.close())
  return store
}

/** The whole kept log, read a page of `limit` at a time. */
async function wholeFeed (store: PlantStore, options: { tag?: string, types?: ChangeRecord['type'][], limit?: number } = {}): Promise<ChangeRecord[]> {
  const changes: ChangeRecord[] = []
  let after = 0n
  for (;;) {
    const page = await store.changes.read({ after, limit: options.limit ?? 1000, tag: options.tag, types: options.types, keptSince: 0 })
    if (page.status !== 'page') throw new Error('expired')
    changes.push(...page.changes)
    if (page.changes.length === 0) return changes
    after = (page.changes.at(-1) as ChangeRecord).seq
  }
}

/** The changes without their commit times, which the tests check apart. */
const withoutTimes = (changes: readonly ChangeRecord[]) => changes.map(({ at, ...change }) => change)

for (const backend of backends) {
  describe(`the change log on ${backend.name}`, () => {
    it('given every kind of write, records one change per write that changed a plant, numbered 1, 2, 3… in order', async () => {
      const store = await opened(backend.open)
      const before = Date.now()
      expect(await store.changes.head()).toBe(0n)

      await store.create(fern, 'ci')
      await store.create(fern, 'ci') // a replay: nothing changed
      await store.create({ id: 1n, name: 'Other' }, 'ci') // a conflict: nothing changed
      await store.put(ivy, undefined, 'jwt:user-7')
      await store.put(ivy, undefined, 'jwt:user-7') // the same plant: nothing changed
      await store.patch(1n, { tag: null }, undefined, 'cli')
      await store.patch(1n, { tag: null }, undefined, 'cli') // nothing changed
      await store.delete(ivy.id, undefined, 'ci')
      await store.delete(ivy.id, undefined, 'ci') // not found
      await store.delete(2n, { plant: fern }, 'ci') // stale
      await store.writePlan({
        expected: new Map([[1n, { id: 1n, name: 'Fern' }], [3n, undefined]]),
        changes: [
          { id: 3n, before: undefined, after: { id: 3n, name: 'Moss', tag: 'shade' } },
          { id: 1n, before: { id: 1n, name: 'Fern' }, after: undefined },
          { id: 3n, before: { id: 3n, name: 'Moss', tag: 'shade' }, after: { id: 3n, name: 'Moss', tag: 'sun' } }
        ]
      }, 'batcher')
      await store.writePlan({ expected: new Map([[1n, fern]]), changes: [{ id: 1n, before: fern, after: undefined }] }, 'batcher') // stale

      const changes = await wholeFeed(store)
      expect(withoutTimes(changes)).toEqual([
        { seq: 1n, type: 'plant.created', id: 1n, plant: fern, by: 'ci' },
        { seq: 2n, type: 'plant.created', id: ivy.id, plant: ivy, by: 'jwt:user-7' },
        { seq: 3n, type: 'plant.updated', id: 1n, plant: { id: 1n, name: 'Fern' }, by: 'cli', leftTag: 'shade' },
        { seq: 4n, type: 'plant.deleted', id: ivy.id, by: 'ci' },
        { seq: 5n, type: 'plant.created', id: 3n, plant: { id: 3n, name: 'Moss', tag: 'shade' }, by: 'batcher' },
        { seq: 6n, type: 'plant.deleted', id: 1n, by: 'batcher' },
        { seq: 7n, type: 'plant.updated', id: 3n, plant: { id: 3n, name: 'Moss', tag: 'sun' }, by: 'batcher', leftTag: 'shade' }
      ])
      for (const change of changes) expect(change.at).toBeGreaterThanOrEqual(before - 5)
      expect(changes.map((change) => change.at)).toEqual([...changes.map((change) => change.at)].sort((a, b) => a - b))
      expect(await store.changes.head()).toBe(7n)
      expect(await store.changes.extent()).toEqual({ head: 7n, kept: 7, oldestSeq: 1n })
    })

    it('given names that need escaping and every type, reads the same page as JSON text as its records written by changeJson', async () => {
      const store = await opened(backend.open)
      const names = ['"quoted" \\ back', 'tab\tnew\nline\u0001', 'Monstera ça pousse 🌿', '\u2028 and \u007f']
      for (const [index, name] of names.entries()) await store.create({ id: BigInt(index) - 9223372036854775808n, name, tag: name })
      await store.put({ id: -9223372036854775808n, name: 'Renamed' })
      await store.delete(-9223372036854775807n)
      for (const filter of [{}, { tag: names[2] }, { types: ['plant.deleted' as const] }]) {
        const request = { after: 0n, limit: 100, keptSince: 0, ...filter }
        const records = await store.changes.read(request)
        const json = await store.changes.readJson(request)
        if (records.status !== 'page' || json.status !== 'page') throw new Error('expired')
        expect(json).toEqual({ status: 'page', json: `[${records.changes.map(changeJson).join(',')}]`, lastSeq: records.changes.at(-1)?.seq })
      }
      expect(await store.changes.readJson({ after: 6n, limit: 10, keptSince: 0 })).toEqual({ status: 'page', json: '[]', lastSeq: undefined })
    })

    it('given a page size, reads the log a page at a time, after any seq', async () => {
      const store = await opened(backend.open)
      for (let id = 1n; id <= 5n; id++) await store.create({ id, name: `Plant ${id}` })
      const page = await store.changes.read({ after: 2n, limit: 2, keptSince: 0 })
      expect(page.status === 'page' && page.changes.map((change) => change.seq)).toEqual([3n, 4n])
      const last = await store.changes.read({ after: 5n, limit: 2, keptSince: 0 })
      expect(last).toEqual({ status: 'page', changes: [] })
      expect(await store.changes.read({ after: 99n, limit: 2, keptSince: 0 })).toEqual({ status: 'page', changes: [] })
    })

    it('given a tag, reads the changes of plants that had it before or after, plants leaving it included', async () => {
      const store = await opened(backend.open)
      await store.create({ id: 1n, name: 'Fern', tag: 'shade' })
      await store.create({ id: 2n, name: 'Rose', tag: 'sun' })
      await store.put({ id: 2n, name: 'Rose', tag: 'shade' }) // joins
      await store.put({ id: 1n, name: 'Fern', tag: 'sun' }) // leaves
      await store.put({ id: 2n, name: 'Red rose', tag: 'shade' }) // stays
      await store.delete(2n) // leaves, deleted
      await store.create({ id: 3n, name: 'Moss' })

      expect((await wholeFeed(store, { tag: 'shade', limit: 2 })).map((change) => change.seq)).toEqual([1n, 3n, 4n, 5n, 6n])
      expect((await wholeFeed(store, { tag: 'sun' })).map((change) => change.seq)).toEqual([2n, 3n, 4n])
      expect(await wholeFeed(store, { tag: 'none' })).toEqual([])
      expect((await wholeFeed(store, { tag: 'shade', types: ['plant.deleted', 'plant.created'] })).map((change) => change.seq)).toEqual([1n, 6n])
      expect((await wholeFeed(store, { types: ['plant.updated'], limit: 1 })).map((change) => change.seq)).toEqual([3n, 4n, 5n])
    })

    it('given a plant, reads its kept changes newest first, a page at a time', async () => {
      const store = await opened(backend.open)
      await store.create({ id: 5n, name: 'A' }, 'one')
      await store.create({ id: 6n, name: 'Other' }, 'one')
      await store.put({ id: 5n, name: 'B' }, undefined, 'two')
      await store.delete(5n, undefined, 'three')
      await store.put({ id: 5n, name: 'B' }, undefined, 'four')

      const newest = await store.changes.history({ id: 5n, limit: 3 })
      expect(withoutTimes(newest)).toEqual([
        { seq: 5n, type: 'plant.created', id: 5n, plant: { id: 5n, name: 'B' }, by: 'four' },
        { seq: 4n, type: 'plant.deleted', id: 5n, by: 'three' },
        { seq: 3n, type: 'plant.updated', id: 5n, plant: { id: 5n, name: 'B' }, by: 'two' }
      ])
      expect(withoutTimes(await store.changes.history({ id: 5n, before: 3n, limit: 3 }))).toEqual([
        { seq: 1n, type: 'plant.created', id: 5n, plant: { id: 5n, name: 'A' }, by: 'one' }
      ])
      expect(await store.changes.history({ id: 7n, limit: 3 })).toEqual([])
    })

    it('given changes past the retention, prunes them in chunks, keeps the head, and calls a resume point before them expired', async () => {
      const store = await opened(backend.open)
      for (let id = 1n; id <= 7n; id++) await store.create({ id, name: `Plant ${id}` })
      const cutoff = Date.now() + 1
      await new Promise((resolve) => setTimeout(resolve, 5))
      await store.create({ id: 8n, name: 'Kept' })

      expect(await store.changes.read({ after: 0n, limit: 10, keptSince: cutoff })).toEqual({ status: 'expired' })
      expect(await store.changes.prune(cutoff, 3)).toBe(3)
      expect(await store.changes.prune(cutoff, 3)).toBe(3)
      expect(await store.changes.prune(cutoff, 3)).toBe(1)
      expect(await store.changes.prune(cutoff, 3)).toBe(0)

      expect(await store.changes.head()).toBe(8n)
      expect(await store.changes.extent()).toEqual({ head: 8n, kept: 1, oldestSeq: 8n })
      for (const after of [0n, 6n]) expect(await store.changes.read({ after, limit: 10, keptSince: 0 })).toEqual({ status: 'expired' })
      const resumed = await store.changes.read({ after: 7n, limit: 10, keptSince: 0 })
      expect(resumed.status === 'page' && resumed.changes.map((change) => change.seq)).toEqual([8n])
      expect(await store.changes.history({ id: 3n, limit: 10 })).toEqual([])

      expect(await store.changes.prune(Date.now() + 1, 10)).toBe(1)
      expect(await store.changes.extent()).toEqual({ head: 8n, kept: 0, oldestSeq: undefined })
      await store.create({ id: 9n, name: 'After' })
      expect(await store.changes.head()).toBe(9n)
    })
  })
}
