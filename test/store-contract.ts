import { describe, expect, it } from 'vitest'
import { INT64_MAX, INT64_MIN } from '../src/schemas.js'
import type { PlantRecord, PlantStore } from '../src/store/plant-store.js'

/**
 * What the routes rely on from every storage adapter. Each backend's test file runs this same suite
 * with its own `open` (a fresh, empty store); the suite closes what it opens.
 */
export function storeContract (backendName: string, open: () => Promise<PlantStore> | PlantStore): void {
  async function withStore (test: (store: PlantStore) => Promise<void>): Promise<void> {
    const store = await open()
    try {
      await test(store)
    } finally {
      await store.close()
    }
  }

  describe(`the ${backendName} store`, () => {
    it('creates a new plant, replays the same one and reports a conflict with the stored one', () => withStore(async (store) => {
      const created = await store.create({ id: 1n, name: 'Fern', tag: 'green' })
      const replayed = await store.create({ id: 1n, name: 'Fern', tag: 'green' })
      const conflict = await store.create({ id: 1n, name: 'Fern', tag: 'blue' })

      expect(created).toEqual({ status: 'created', plant: { id: 1n, name: 'Fern', tag: 'green' } })
      expect(replayed).toEqual({ status: 'replayed', plant: { id: 1n, name: 'Fern', tag: 'green' } })
      expect(conflict).toEqual({ status: 'conflict', existing: { id: 1n, name: 'Fern', tag: 'green' } })
    }))

    it('keeps an absent tag and an empty tag apart', () => withStore(async (store) => {
      await store.create({ id: 2n, name: 'Fern' })
      await store.create({ id: 3n, name: 'Fern', tag: '' })

      expect(await store.create({ id: 2n, name: 'Fern', tag: '' })).toEqual({ status: 'conflict', existing: { id: 2n, name: 'Fern' } })
      expect(await store.create({ id: 3n, name: 'Fern' })).toEqual({ status: 'conflict', existing: { id: 3n, name: 'Fern', tag: '' } })
    }))

    it.each([
      ['the smallest int64', INT64_MIN],
      ['the largest int64', INT64_MAX],
      ['2^53 + 1', 2n ** 53n + 1n],
      ['-(2^53 + 1)', -(2n ** 53n) - 1n]
    ])('keeps %s exactly', (_case, id) => withStore(async (store) => {
      await store.create({ id, name: 'edge' })
      await store.create({ id: id === INT64_MIN ? id + 1n : id - 1n, name: 'neighbour' })

      const again = await store.create({ id, name: 'other' })

      expect(again).toEqual({ status: 'conflict', existing: { id, name: 'edge' } })
      expect(again.status === 'conflict' && typeof again.existing.id).toBe('bigint')
    }))

    it('keeps astral, combining and right-to-left text byte-exactly', () => withStore(async (store) => {
      const name = '\u{1F331} Cafe\u0301 \u05E9\u05DC\u05D5\u05DD \u{10FFFF}'
      const tag = ' \uFEFF\u{1D11E}\t'
      await store.create({ id: 4n, name, tag })

      const again = await store.create({ id: 4n, name: 'x' })

      expect(again.status === 'conflict' && Buffer.from(again.existing.name).equals(Buffer.from(name))).toBe(true)
      expect(again.status === 'conflict' && again.existing.tag).toBe(tag)
      expect(await store.create({ id: 4n, name, tag })).toMatchObject({ status: 'replayed' })
    }))

    it('lets exactly one of many concurrent conflicting creates win', () => withStore(async (store) => {
      const names = Array.from({ length: 25 }, (_, index) => `contender-${index}`)

      const outcomes = await Promise.all(names.map((name) => store.create({ id: 5n, name })))

      const created = outcomes.filter((outcome) => outcome.status === 'created')
      expect(created).toHaveLength(1)
      const winner = created[0]?.status === 'created' ? created[0].plant : undefined
      expect(outcomes.filter((outcome) => outcome.status === 'conflict')).toHaveLength(24)
      for (const outcome of outcomes) {
        if (outcome.status === 'conflict') expect(outcome.existing).toEqual(winner)
      }
    }))

    it('reads a plant as its exact JSON document, escaping as JSON.stringify does', () => withStore(async (store) => {
      const plants: PlantRecord[] = [
        { id: INT64_MIN, name: 'smallest' },
        { id: INT64_MAX, name: 'largest', tag: '' },
        { id: 2n ** 53n + 1n, name: 'quote " backslash \\ slash /', tag: 'controls \u0001\n\t\u001f del \u007f' },
        { id: -7n, name: '\u{1F331} Cafe\u0301 \u05E9\u05DC\u05D5\u05DD \u2028 \u{10FFFF}', tag: ' \uFEFF\u{1D11E}' }
      ]
      for (const plant of plants) await store.create(plant)

      for (const plant of plants) expect(await store.get(plant.id)).toBe(referenceDocument(plant))
      expect(await store.get(8n)).toBeUndefined()
    }))

    it('reads pages in id order, naming the next page only while more plants follow', () => withStore(async (store) => {
      const ids = [5n, -3n, 2n ** 60n, 0n, 9n]
      for (const id of ids) await store.create({ id, name: `plant ${id}`, ...(id === 0n ? {} : { tag: 'x' }) })
      const documents = [...ids].sort((a, b) => (a < b ? -1 : 1))
        .map((id) => referenceDocument({ id, name: `plant ${id}`, ...(id === 0n ? {} : { tag: 'x' }) }))

      expect(await store.list({ limit: 2 })).toEqual({ json: `[${documents.slice(0, 2).join(',')}]`, nextAfter: 0n })
      expect(await store.list({ after: 0n, limit: 2 })).toEqual({ json: `[${documents.slice(2, 4).join(',')}]`, nextAfter: 9n })
      expect(await store.list({ after: 9n, limit: 2 })).toEqual({ json: `[${documents[4]}]` })
      expect(await store.list({ after: 4n, limit: 3 })).toEqual({ json: `[${documents.slice(2).join(',')}]` })
      expect(await store.list({ limit: 100 })).toEqual({ json: `[${documents.join(',')}]` })
      expect(await store.list({ after: INT64_MAX, limit: 10 })).toEqual({ json: '[]' })
      expect(JSON.parse((await store.list({ after: -4n, limit: 1 })).json)).toEqual([{ id: -3, name: 'plant -3', tag: 'x' }])
    }))

    it('reads an empty store as an empty page', () => withStore(async (store) => {
      expect(await store.list({ limit: 1 })).toEqual({ json: '[]' })
    }))

    it('answers a ping', () => withStore(async (store) => {
      await expect(store.ping()).resolves.toBeUndefined()
    }))
  })
}

/** What every backend must answer for a plant: JSON.stringify's text, keys in schema order, the id exact. */
function referenceDocument ({ id, name, tag }: PlantRecord): string {
  const text = JSON.stringify(tag === undefined ? { id: 0, name } : { id: 0, name, tag })
  return text.replace('{"id":0,', `{"id":${id},`)
}
