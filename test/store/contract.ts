import { describe, expect, it } from 'vitest'
import { INT64_MAX, INT64_MIN } from '../../src/schemas/kinds.js'
import type { PlantRecord, PlantStore } from '../../src/store/plant-store.js'

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

    it('puts a plant: created when the id is free, replaced whole when it is taken', () => withStore(async (store) => {
      const created = await store.put({ id: 10n, name: 'Fern', tag: 'green' })
      const withoutTag = await store.put({ id: 10n, name: 'Fern' })
      const sameAgain = await store.put({ id: 10n, name: 'Fern' })
      const emptyTag = await store.put({ id: 10n, name: 'Ivy', tag: '' })

      expect(created).toEqual({ status: 'created', plant: { id: 10n, name: 'Fern', tag: 'green' } })
      expect(withoutTag).toEqual({ status: 'replaced', plant: { id: 10n, name: 'Fern' } })
      expect(sameAgain).toEqual({ status: 'replaced', plant: { id: 10n, name: 'Fern' } })
      expect(emptyTag).toEqual({ status: 'replaced', plant: { id: 10n, name: 'Ivy', tag: '' } })
      expect(await store.get(10n)).toBe('{"id":10,"name":"Ivy","tag":""}')
      expect(await store.create({ id: 10n, name: 'Ivy', tag: '' })).toEqual({ status: 'replayed', plant: { id: 10n, name: 'Ivy', tag: '' } })
    }))

    it('patches a plant: a name renames it, a tag sets it, a null tag removes it; an absent plant is not found', () => withStore(async (store) => {
      await store.create({ id: 11n, name: 'Fern', tag: 'green' })

      const renamed = await store.patch(11n, { name: 'Ivy' })
      const tagged = await store.patch(11n, { tag: '' })
      const untagged = await store.patch(11n, { tag: null })
      const unchanged = await store.patch(11n, {})
      const both = await store.patch(11n, { name: 'Moss', tag: 'damp' })
      const absent = await store.patch(12n, { name: 'Ivy' })

      expect(renamed).toEqual({ status: 'patched', plant: { id: 11n, name: 'Ivy', tag: 'green' } })
      expect(tagged).toEqual({ status: 'patched', plant: { id: 11n, name: 'Ivy', tag: '' } })
      expect(untagged).toEqual({ status: 'patched', plant: { id: 11n, name: 'Ivy' } })
      expect(unchanged).toEqual({ status: 'patched', plant: { id: 11n, name: 'Ivy' } })
      expect(both).toEqual({ status: 'patched', plant: { id: 11n, name: 'Moss', tag: 'damp' } })
      expect(absent).toEqual({ status: 'not-found' })
      expect(await store.get(11n)).toBe('{"id":11,"name":"Moss","tag":"damp"}')
      expect(await store.get(12n)).toBeUndefined()
    }))

    it('deletes a plant once; its id is then free', () => withStore(async (store) => {
      await store.create({ id: 13n, name: 'Fern' })

      const deleted = await store.delete(13n)
      const again = await store.delete(13n)

      expect(deleted).toEqual({ status: 'deleted' })
      expect(again).toEqual({ status: 'not-found' })
      expect(await store.get(13n)).toBeUndefined()
      expect(await store.create({ id: 13n, name: 'Cactus' })).toEqual({ status: 'created', plant: { id: 13n, name: 'Cactus' } })
    }))

    it('applies a conditional write only while the store holds the expected plant', () => withStore(async (store) => {
      const fern = { id: 14n, name: 'Fern', tag: 'green' }
      const ivy = { id: 14n, name: 'Ivy', tag: 'green' }
      const moss = { id: 15n, name: 'Moss' }

      expect(await store.put(fern, { plant: undefined })).toEqual({ status: 'created', plant: fern })
      expect(await store.put(ivy, { plant: fern })).toEqual({ status: 'replaced', plant: ivy })
      expect(await store.patch(14n, { tag: null }, { plant: ivy })).toEqual({ status: 'patched', plant: { id: 14n, name: 'Ivy' } })
      expect(await store.put(moss, { plant: undefined })).toEqual({ status: 'created', plant: moss })
      expect(await store.delete(15n, { plant: moss })).toEqual({ status: 'deleted' })
      expect(await store.get(14n)).toBe('{"id":14,"name":"Ivy"}')
      expect(await store.get(15n)).toBeUndefined()
    }))

    it('answers a conditional write that expected another plant as stale, with the exact current plant, and changes nothing', () => withStore(async (store) => {
      const stored = { id: 16n, name: 'Fern', tag: '' }
      await store.create(stored)
      const otherName = { id: 16n, name: 'Ivy', tag: '' }
      const noTag = { id: 16n, name: 'Fern' }
      const replacement = { id: 16n, name: 'Moss', tag: 'damp' }

      const outcomes = [
        await store.put(replacement, { plant: undefined }),
        await store.put(replacement, { plant: otherName }),
        await store.put(replacement, { plant: noTag }),
        await store.patch(16n, { name: 'Moss' }, { plant: undefined }),
        await store.patch(16n, { tag: null }, { plant: noTag }),
        await store.delete(16n, { plant: undefined }),
        await store.delete(16n, { plant: otherName })
      ]

      for (const outcome of outcomes) expect(outcome).toEqual({ status: 'stale', current: stored })
      expect(await store.get(16n)).toBe('{"id":16,"name":"Fern","tag":""}')
    }))

    it('answers a conditional write that expected a plant the store does not hold as stale with no current plant', () => withStore(async (store) => {
      const expected = { plant: { id: 17n, name: 'Fern' } }

      const put = await store.put({ id: 17n, name: 'Ivy' }, expected)
      const patch = await store.patch(17n, { name: 'Ivy' }, expected)
      const remove = await store.delete(17n, expected)

      for (const outcome of [put, patch, remove]) expect(outcome).toEqual({ status: 'stale', current: undefined })
      expect(await store.get(17n)).toBeUndefined()
      expect(await store.patch(17n, { name: 'Ivy' }, { plant: undefined })).toEqual({ status: 'not-found' })
      expect(await store.delete(17n, { plant: undefined })).toEqual({ status: 'not-found' })
      expect(await store.get(17n)).toBeUndefined()
    }))

    it('lets exactly one of many concurrent conditional writes expecting the same plant apply', () => withStore(async (store) => {
      const stored = { id: 18n, name: 'Fern' }
      await store.create(stored)
      const names = Array.from({ length: 12 }, (_, index) => `contender-${index}`)

      const outcomes = await Promise.all(names.map((name, index) => index % 2 === 0
        ? store.put({ id: 18n, name }, { plant: stored })
        : store.patch(18n, { name }, { plant: stored })))

      const applied = outcomes.filter((outcome) => outcome.status === 'replaced' || outcome.status === 'patched')
      expect(applied).toHaveLength(1)
      const winner = applied[0] !== undefined && 'plant' in applied[0] ? applied[0].plant : undefined
      expect(outcomes.filter((outcome) => outcome.status === 'stale')).toEqual(Array(11).fill({ status: 'stale', current: winner }))
      expect(await store.get(18n)).toBe(referenceDocument(winner ?? stored))
    }))

    it('reads the exact JSON document of a plant written by put or patch, in get and in pages', () => withStore(async (store) => {
      const put: PlantRecord = { id: INT64_MAX, name: 'quote " backslash \\ slash /', tag: 'controls \u0001\n\t\u001f del \u007f' }
      const base: PlantRecord = { id: -(2n ** 53n) - 1n, name: 'plain' }
      const patchedName = '\u{1F331} Cafe\u0301 \u05E9\u05DC\u05D5\u05DD \u2028 \u2029 \u{10FFFF}'
      const patchedTag = ' \uFEFF\u{1D11E}<>&\''
      await store.put(put)
      await store.create(base)
      await store.patch(base.id, { name: patchedName, tag: patchedTag })
      const documents = [referenceDocument({ id: base.id, name: patchedName, tag: patchedTag }), referenceDocument(put)]

      expect(await store.get(put.id)).toBe(documents[1])
      expect(await store.get(base.id)).toBe(documents[0])
      expect(await store.list({ limit: 10 })).toEqual({ json: `[${documents.join(',')}]` })
      expect(await store.list({ limit: 10, tag: patchedTag })).toEqual({ json: `[${documents[0]}]` })
    }))

    it('reads pages of one tag exactly: other tags, other cases and plants without a tag never match', () => withStore(async (store) => {
      const plants: PlantRecord[] = [
        { id: 9n, name: 'a', tag: 'x' },
        { id: -4n, name: 'b', tag: 'x' },
        { id: 0n, name: 'c' },
        { id: 2n, name: 'd', tag: 'X' },
        { id: 3n, name: 'e', tag: '' },
        { id: 5n, name: 'f', tag: 'x' },
        { id: 6n, name: 'g', tag: 'x ' },
        { id: 7n, name: 'h', tag: 'x' },
        { id: 8n, name: 'i', tag: '' },
        { id: 12n, name: 'j', tag: 'y' }
      ]
      for (const plant of plants) await store.create(plant)
      const tagged = (tag: string) => [...plants].sort((a, b) => (a.id < b.id ? -1 : 1)).filter((plant) => plant.tag === tag).map(referenceDocument)
      const x = tagged('x')

      expect(await store.list({ limit: 2, tag: 'x' })).toEqual({ json: `[${x.slice(0, 2).join(',')}]`, nextAfter: 5n })
      expect(await store.list({ after: 5n, limit: 2, tag: 'x' })).toEqual({ json: `[${x.slice(2, 4).join(',')}]` })
      expect(await store.list({ after: 4n, limit: 1, tag: 'x' })).toEqual({ json: `[${x[1]}]`, nextAfter: 5n })
      expect(await store.list({ after: 9n, limit: 5, tag: 'x' })).toEqual({ json: '[]' })
      expect(await store.list({ limit: 100, tag: 'x' })).toEqual({ json: `[${x.join(',')}]` })
      expect(await store.list({ limit: 100, tag: '' })).toEqual({ json: `[${tagged('').join(',')}]` })
      expect(await store.list({ limit: 1, tag: '' })).toEqual({ json: `[${tagged('')[0]}]`, nextAfter: 3n })
      expect(await store.list({ limit: 100, tag: 'X' })).toEqual({ json: `[${tagged('X').join(',')}]` })
      expect(await store.list({ limit: 100, tag: 'x ' })).toEqual({ json: `[${tagged('x ').join(',')}]` })
      expect(await store.list({ limit: 100, tag: 'z' })).toEqual({ json: '[]' })
      expect(await store.list({ limit: 100, tag: 'Cafe\u0301' })).toEqual({ json: '[]' })
    }))

    it('moves a plant between the pages of its old and new tag when put or patch changes the tag', () => withStore(async (store) => {
      await store.create({ id: 1n, name: 'Fern', tag: 'Caf\u00E9' })
      await store.create({ id: 2n, name: 'Ivy', tag: 'Caf\u00E9' })

      await store.put({ id: 1n, name: 'Fern', tag: 'Cafe\u0301' })
      await store.patch(2n, { tag: null })
      await store.put({ id: 3n, name: 'Moss', tag: 'Caf\u00E9' })

      expect(await store.list({ limit: 10, tag: 'Caf\u00E9' })).toEqual({ json: `[${referenceDocument({ id: 3n, name: 'Moss', tag: 'Caf\u00E9' })}]` })
      expect(await store.list({ limit: 10, tag: 'Cafe\u0301' })).toEqual({ json: `[${referenceDocument({ id: 1n, name: 'Fern', tag: 'Cafe\u0301' })}]` })
    }))

    it('drops a deleted plant from its tag\'s pages; a plant created again under its id is only on its new tag\'s pages', () => withStore(async (store) => {
      const page = async (tag: string) => (await store.list({ limit: 10, tag })).json
      const documents = (...plants: PlantRecord[]) => `[${plants.map(referenceDocument).join(',')}]`
      await store.create({ id: 1n, name: 'Fern', tag: 'x' })
      await store.create({ id: 2n, name: 'Ivy', tag: 'x' })
      await store.create({ id: 3n, name: 'Moss', tag: 'y' })
      await store.create({ id: 4n, name: 'Rose', tag: 'x' })

      expect(await store.delete(1n)).toEqual({ status: 'deleted' })
      expect(await page('x')).toBe(documents({ id: 2n, name: 'Ivy', tag: 'x' }, { id: 4n, name: 'Rose', tag: 'x' }))
      await store.delete(2n)
      await store.delete(3n)
      await store.create({ id: 1n, name: 'Fern', tag: 'y' })
      await store.put({ id: 2n, name: 'Ivy', tag: 'z' })
      await store.create({ id: 3n, name: 'Moss', tag: 'y' })
      // Issued together, so they may share a commit; they are answered as if one after the other.
      const [deleted, created] = await Promise.all([store.delete(4n), store.create({ id: 4n, name: 'Rose' })])

      expect([deleted, created]).toEqual([{ status: 'deleted' }, { status: 'created', plant: { id: 4n, name: 'Rose' } }])
      expect(await page('x')).toBe('[]')
      expect(await page('y')).toBe(documents({ id: 1n, name: 'Fern', tag: 'y' }, { id: 3n, name: 'Moss', tag: 'y' }))
      expect(await page('z')).toBe(documents({ id: 2n, name: 'Ivy', tag: 'z' }))
      expect((await store.list({ limit: 10 })).json).toBe(documents(
        { id: 1n, name: 'Fern', tag: 'y' }, { id: 2n, name: 'Ivy', tag: 'z' }, { id: 3n, name: 'Moss', tag: 'y' }, { id: 4n, name: 'Rose' }))
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
