/**
 * `writePlan`, the compare-and-set of many plants a batch is written with, on every backend: written
 * whole while each id holds what the plan expects, and not at all (stale) once one does not, whatever
 * other writes share its transaction.
 */
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PlantRecord, PlantStore } from '../../src/store/plant-store.js'
import type { WritePlan } from '../../src/store/write-operations.js'
import { backends } from '../helpers/app.js'

const fern: PlantRecord = { id: 1n, name: 'Fern', tag: 'shade' }
const moss: PlantRecord = { id: 2n, name: 'Moss' }

async function everyPlant (store: PlantStore): Promise<unknown> {
  return JSON.parse((await store.list({ limit: 100 })).json) as unknown
}

/** Creates plants 10 and 11, renames Fern and deletes Moss, expecting Fern and Moss as stored and no 10 or 11. */
function planOn (expectedFern: PlantRecord | undefined = fern): WritePlan {
  const created = { id: 10n, name: 'Ten' }
  return {
    expected: new Map<bigint, PlantRecord | undefined>([[10n, undefined], [1n, expectedFern], [2n, moss], [11n, undefined]]),
    changes: [
      { id: 10n, before: undefined, after: created },
      { id: 1n, before: expectedFern, after: { id: 1n, name: 'Old fern', tag: 'shade' } },
      { id: 2n, before: moss, after: undefined },
      { id: 11n, before: undefined, after: { id: 11n, name: 'Eleven' } },
      { id: 10n, before: created, after: { id: 10n, name: 'Ten', tag: 'renamed twice' } }
    ]
  }
}

describe.each(backends)('writePlan on $name', (backend) => {
  const open = async () => {
    const store = await backend.open()
    onTestFinished(() => store.close())
    await store.create(fern)
    await store.create(moss)
    return store
  }

  it('writes every change in order while each id holds what the plan expects', async () => {
    const store = await open()

    expect(await store.writePlan(planOn())).toEqual({ status: 'written' })
    expect(await everyPlant(store)).toEqual([{ id: 1, name: 'Old fern', tag: 'shade' }, { id: 10, name: 'Ten', tag: 'renamed twice' }, { id: 11, name: 'Eleven' }])
  })

  it.each([
    ['a plant it expects absent is stored', async (store: PlantStore) => { await store.create({ id: 11n, name: 'Taken' }) }, planOn(),
      [{ id: 1, name: 'Fern', tag: 'shade' }, { id: 2, name: 'Moss' }, { id: 11, name: 'Taken' }]],
    ['a plant it expects is another version', async () => {}, planOn({ id: 1n, name: 'Fern' }),
      [{ id: 1, name: 'Fern', tag: 'shade' }, { id: 2, name: 'Moss' }]]
  ])('is stale, and writes nothing, when %s; the writes sharing its transaction are written', async (_case, before, plan, plants) => {
    const store = await open()
    await before(store)

    const [planned, created] = await Promise.all([store.writePlan(plan), store.create({ id: 20n, name: 'Beside' })])

    expect(planned).toEqual({ status: 'stale' })
    expect(created).toEqual({ status: 'created', plant: { id: 20n, name: 'Beside' } })
    expect(await everyPlant(store)).toEqual([...plants, { id: 20, name: 'Beside' }])
  })
})
