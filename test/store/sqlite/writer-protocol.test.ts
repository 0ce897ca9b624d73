import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PlantRecord } from '../../../src/store/plant-store.js'
import { openSqliteStore } from '../../../src/store/sqlite/store.js'
import { packCreates, unpackCreates } from '../../../src/store/sqlite/writer-protocol.js'
import { temporaryFolder } from '../../helpers/app.js'

describe('the packed batch of creates sent to the SQLite writer thread', () => {
  it('given plants with and without tags, unpacks to the same plants', () => {
    const plants: PlantRecord[] = [
      { id: 1n, name: 'Fern' },
      { id: -9223372036854775808n, name: 'Ivy', tag: '' },
      { id: 9223372036854775807n, name: '+-\u0001 "quoted" \\ 🌵', tag: '-' },
      { id: 7n, name: 'Rose', tag: '+red' }
    ]
    const packed = packCreates(plants)
    expect(packed).toBeTypeOf('string')
    expect(unpackCreates(packed as string)).toEqual(plants)
  })

  it('given a name or a tag holding U+0000, is not packed', () => {
    expect(packCreates([{ id: 1n, name: 'a\u0000b' }])).toBeUndefined()
    expect(packCreates([{ id: 1n, name: 'a', tag: '\u0000' }])).toBeUndefined()
  })

  it('given creates of one turn that insert, replay and conflict, answers each with its own outcome', async () => {
    const store = openSqliteStore(join(temporaryFolder(), 'packed.db'))
    onTestFinished(() => store.close())
    await store.create({ id: 3n, name: 'Stored', tag: 'old' })
    const outcomes = await Promise.all([
      store.create({ id: 1n, name: 'New' }),
      store.create({ id: 3n, name: 'Stored', tag: 'old' }),
      store.create({ id: 3n, name: 'Other' }),
      store.create({ id: 2n, name: 'Twice', tag: 't' }),
      store.create({ id: 2n, name: 'Twice', tag: 't' }),
      store.create({ id: 2n, name: 'Twice', tag: 'u' })
    ])
    expect(outcomes).toEqual([
      { status: 'created', plant: { id: 1n, name: 'New' } },
      { status: 'replayed', plant: { id: 3n, name: 'Stored', tag: 'old' } },
      { status: 'conflict', existing: { id: 3n, name: 'Stored', tag: 'old' } },
      { status: 'created', plant: { id: 2n, name: 'Twice', tag: 't' } },
      { status: 'replayed', plant: { id: 2n, name: 'Twice', tag: 't' } },
      { status: 'conflict', existing: { id: 2n, name: 'Twice', tag: 't' } }
    ])
    expect(await store.get(2n)).toBe('{"id":2,"name":"Twice","tag":"t"}')
  })
})
