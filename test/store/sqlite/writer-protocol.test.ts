import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PlantRecord } from '../../../src/store/plant-store.js'
import { openSqliteStore } from '../../../src/store/sqlite/store.js'
import { packCreates, packPlan, unpackCreates, unpackPlan } from '../../../src/store/sqlite/writer-protocol.js'
import type { WritePlan } from '../../../src/store/write-operations.js'
import { temporaryFolder } from '../../helpers/app.js'

describe('the packed batch of creates sent to the SQLite writer thread', () => {
  it('given plants with and without tags, made by several writers, unpacks to the same plants and writers', () => {
    const plants: PlantRecord[] = [
      { id: 1n, name: 'Fern' },
      { id: -9223372036854775808n, name: 'Ivy', tag: '' },
      { id: 9223372036854775807n, name: '+-\u0001 "quoted" \\ 🌵', tag: '-' },
      { id: 7n, name: 'Rose', tag: '+red' }
    ]
    const creates = plants.map((plant, index) => ({ plant, by: ['ci', 'jwt:user|1', '', 'cli'][index] as string }))
    const packed = packCreates(creates)
    expect(packed).toBeTypeOf('string')
    expect(unpackCreates(packed as string)).toEqual(creates)
  })

  it('given a name, a tag or a writer holding U+0000, is not packed', () => {
    expect(packCreates([{ plant: { id: 1n, name: 'a\u0000b' }, by: 'ci' }])).toBeUndefined()
    expect(packCreates([{ plant: { id: 1n, name: 'a', tag: '\u0000' }, by: 'ci' }])).toBeUndefined()
    expect(packCreates([{ plant: { id: 1n, name: 'a' }, by: 'c\u0000i' }])).toBeUndefined()
  })

  it('given a plan that creates, changes, deletes and expects plants absent, unpacks to its expectations and its changes in order', () => {
    const fern = { id: 1n, name: 'Fern', tag: '' }
    const odd = { id: 9223372036854775807n, name: '+-!\u0001 "quoted" \\ 🌵', tag: '!' }
    const plan: WritePlan = {
      expected: new Map<bigint, PlantRecord | undefined>([[1n, undefined], [9223372036854775807n, odd], [-5n, { id: -5n, name: 'Gone', tag: '+x' }]]),
      changes: [
        { id: 1n, before: undefined, after: fern },
        { id: 1n, before: fern, after: { id: 1n, name: 'Fern' } },
        { id: 9223372036854775807n, before: odd, after: { ...odd, tag: '-' } },
        { id: -5n, before: { id: -5n, name: 'Gone', tag: '+x' }, after: undefined }
      ]
    }
    const packed = packPlan(plan)
    expect(packed).toBeTypeOf('string')
    expect(unpackPlan(packed as string)).toEqual({
      expected: plan.expected,
      changes: plan.changes.map(({ id, after }) => ({ id, after }))
    })
  })

  it('given a plan whose plant holds U+0000, is not packed', () => {
    expect(packPlan({ expected: new Map([[1n, undefined]]), changes: [{ id: 1n, before: undefined, after: { id: 1n, name: 'a\u0000' } }] })).toBeUndefined()
    expect(packPlan({ expected: new Map([[1n, { id: 1n, name: 'a', tag: '\u0000' }]]), changes: [] })).toBeUndefined()
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
