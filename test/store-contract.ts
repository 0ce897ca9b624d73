import { describe, expect, it } from 'vitest'
import { INT64_MAX, INT64_MIN } from '../src/schemas.js'
import type { PlantStore } from '../src/store/plant-store.js'

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

    it('keeps the first generated token digest', () => withStore(async (store) => {
      const first = Buffer.alloc(32, 1)
      const second = Buffer.alloc(32, 2)

      expect((await store.ensureGeneratedTokenDigest(first)).equals(first)).toBe(true)
      expect((await store.ensureGeneratedTokenDigest(second)).equals(first)).toBe(true)
    }))

    it('answers a ping', () => withStore(async (store) => {
      await expect(store.ping()).resolves.toBeUndefined()
    }))
  })
}
