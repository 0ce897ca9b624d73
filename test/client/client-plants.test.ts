import { describe, expect, it } from 'vitest'
import { PlantstoreError, type Plant } from '../../clients/typescript/src/index.js'
import { backends } from '../helpers/app.js'
import { sharedClientService } from '../helpers/client-service.js'

const TWO_53 = 2n ** 53n
const TWO_63 = 2n ** 63n
/** −2^63, 2^53 + 1 and 2^63 − 1, their neighbours, and the edges of the safe range: every one must come back as sent. */
const EDGE_IDS = [
  -TWO_63, -TWO_63 + 1n, -TWO_53 - 1n, -TWO_53, -TWO_53 + 1n,
  TWO_53 - 1n, TWO_53, TWO_53 + 1n, TWO_53 + 2n, TWO_63 - 2n, TWO_63 - 1n
]

async function rejectionOf (promise: Promise<unknown>): Promise<PlantstoreError> {
  const error = await promise.then(() => undefined, (reason: unknown) => reason)
  expect(error).toBeInstanceOf(PlantstoreError)
  return error as PlantstoreError
}

async function collected<T> (items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = []
  for await (const item of items) all.push(item)
  return all
}

describe.each(backends.filter((backend) => backend.name !== 'memory'))('The TypeScript client against the service on $name', (backend) => {
  const service = sharedClientService(backend)

  it('creates a plant, and a replay of the create resolves the same way', async () => {
    const ps = service().client()
    const created = await ps.plants.create({ id: 101, name: 'Fern', tag: 'shade' })
    expect(created).toEqual({ plant: { id: 101n, name: 'Fern', tag: 'shade' }, etag: expect.stringMatching(/^"[^"]+"$/) })
    expect(await ps.plants.create({ id: '101', name: 'Fern', tag: 'shade' })).toEqual(created)
    expect(await ps.plants.get(101n)).toEqual(created)
  })

  it('rejects with the service\'s status, error, message and request id', async () => {
    const ps = service().client()
    await ps.plants.create({ id: 102n, name: 'Moss' })
    const conflict = await rejectionOf(ps.plants.create({ id: 102n, name: 'Ivy' }))
    expect({ ...conflict, message: conflict.message }).toEqual({
      name: 'PlantstoreError',
      status: 409,
      error: 409,
      message: 'plant 102 already exists with a different name or tag',
      requestId: expect.stringMatching(/^\S+$/),
      retryAfter: undefined
    })
    const missing = await rejectionOf(ps.plants.get(103))
    expect([missing.status, missing.error, missing.message]).toEqual([404, 404, 'no plant has id 103'])
    const invalid = await rejectionOf(ps.plants.create({ id: 104n, name: '' }))
    expect([invalid.status, invalid.message]).toEqual([400, expect.stringMatching(/^name /)])
    const unauthorized = await rejectionOf(service().client({ token: 'not-a-known-token' }).plants.get(102n))
    expect([unauthorized.status, unauthorized.error]).toEqual([401, 401])
  })

  it('replaces a plant whole, creating it when absent, under If-Match and If-None-Match', async () => {
    const ps = service().client()
    const created = await ps.plants.replace(110n, { name: 'Aloe', tag: 'succulent' })
    expect(created).toEqual({ plant: { id: 110n, name: 'Aloe', tag: 'succulent' }, etag: expect.any(String), created: true })
    const replaced = await ps.plants.replace('110', { name: 'Aloe vera' }, { ifMatch: created.etag })
    expect(replaced).toEqual({ plant: { id: 110n, name: 'Aloe vera' }, etag: expect.any(String), created: false })
    expect(replaced.etag).not.toBe(created.etag)
    expect((await rejectionOf(ps.plants.replace(110, { name: 'Agave' }, { ifMatch: created.etag }))).status).toBe(412)
    expect((await rejectionOf(ps.plants.replace(110, { name: 'Agave' }, { ifNoneMatch: '*' }))).status).toBe(412)
    expect((await ps.plants.get(110)).plant).toEqual({ id: 110n, name: 'Aloe vera' })
  })

  it('updates a plant with a merge patch: a tag set, then removed with null', async () => {
    const ps = service().client()
    const { etag } = await ps.plants.create({ id: 120n, name: 'Basil' })
    const tagged = await ps.plants.update(120n, { tag: 'herb' }, { ifMatch: etag })
    expect(tagged.plant).toEqual({ id: 120n, name: 'Basil', tag: 'herb' })
    expect((await rejectionOf(ps.plants.update(120n, { name: 'Thai basil' }, { ifMatch: etag }))).status).toBe(412)
    expect((await ps.plants.update(120n, { tag: null })).plant).toEqual({ id: 120n, name: 'Basil' })
    expect((await rejectionOf(ps.plants.update(121n, { tag: null }))).status).toBe(404)
  })

  it('deletes a plant, under If-Match when given', async () => {
    const ps = service().client()
    const { etag } = await ps.plants.create({ id: 130n, name: 'Cactus' })
    await ps.plants.update(130n, { tag: 'desert' })
    expect((await rejectionOf(ps.plants.delete(130n, { ifMatch: etag }))).status).toBe(412)
    expect(await ps.plants.delete(130n)).toBeUndefined()
    expect((await rejectionOf(ps.plants.get(130n))).status).toBe(404)
    expect((await rejectionOf(ps.plants.delete(130n))).status).toBe(404)
  })

  it('applies a batch and resolves with its results; a failing one rejects with the operation named, and changes nothing', async () => {
    const ps = service().client()
    const { etag } = await ps.plants.create({ id: 140n, name: 'Daisy' })
    const results = await ps.plants.batch([
      { method: 'POST', body: { id: TWO_53 + 141n, name: 'Elm' } },
      { method: 'PUT', id: '142', body: { name: 'Fig', tag: 'tree' }, ifNoneMatch: '*' },
      { method: 'PATCH', id: 140, body: { tag: 'flower' }, ifMatch: etag },
      { method: 'DELETE', id: TWO_53 + 141n }
    ])
    expect(results).toEqual([
      { status: 200, plant: { id: TWO_53 + 141n, name: 'Elm' }, etag: expect.any(String) },
      { status: 201, plant: { id: 142n, name: 'Fig', tag: 'tree' }, etag: expect.any(String) },
      { status: 200, plant: { id: 140n, name: 'Daisy', tag: 'flower' }, etag: expect.any(String) },
      { status: 204 }
    ])
    const failed = await rejectionOf(ps.plants.batch([{ method: 'POST', body: { id: 143n, name: 'Gorse' } }, { method: 'DELETE', id: 144n }]))
    expect([failed.status, failed.message]).toEqual([404, 'operations[1]: no plant has id 144'])
    expect((await rejectionOf(ps.plants.get(143n))).status).toBe(404)
  })

  it('keeps −2^63, 2^53 + 1, 2^63 − 1 and their neighbours exact through every call', async () => {
    const ps = service().client()
    for (const id of EDGE_IDS) {
      expect((await ps.plants.create({ id, name: `edge ${id}`, tag: 'edge' })).plant.id).toBe(id)
      expect((await ps.plants.get(id.toString())).plant).toEqual({ id, name: `edge ${id}`, tag: 'edge' })
      expect((await ps.plants.update(id, { name: `edge ${id}!` })).plant.id).toBe(id)
      expect((await ps.plants.replace(id, { name: `edge ${id}`, tag: 'edge' })).plant.id).toBe(id)
    }
    const listed = await collected(ps.plants.list({ tag: 'edge', pageSize: 4 }))
    expect(listed.map((plant) => plant.id)).toEqual(EDGE_IDS)
    const downward = await collected(ps.plants.list({ tag: 'edge', sort: '-id', after: TWO_53 + 1n }))
    expect(downward.map((plant) => plant.id)).toEqual(EDGE_IDS.filter((id) => id < TWO_53 + 1n).reverse())
    expect(await ps.plants.count({ tag: 'edge' })).toBe(EDGE_IDS.length)
    const removed = await ps.plants.batch(EDGE_IDS.map((id) => ({ method: 'DELETE' as const, id })))
    expect(removed).toHaveLength(EDGE_IDS.length)
  })

  it('lists with a filter, a search and a name order, and counts the same plants', async () => {
    const ps = service().client()
    const names = ['Strelitzia', 'Straße-Palme', 'Stachys', 'strawberry']
    await ps.plants.batch(names.map((name, index) => ({ method: 'POST' as const, body: { id: 150 + index, name, tag: 'str' } })))
    const byName = await collected(ps.plants.list({ tag: 'str', sort: 'name', pageSize: 1 }))
    expect(byName.map((plant: Plant) => plant.name)).toEqual(['Stachys', 'Straße-Palme', 'Strelitzia', 'strawberry'])
    const found = await collected(ps.plants.list({ tag: 'str', q: 'strasse' }))
    expect(found).toEqual([{ id: 151n, name: 'Straße-Palme', tag: 'str' }])
    expect(await ps.plants.count({ tag: 'str' })).toBe(4)
    expect(await ps.plants.count({ tag: 'str', q: 'STRA' })).toBe(2)
    expect(await ps.plants.count({ tag: 'no such tag' })).toBe(0)
  })

  it('walks 2,500 plants in id order across pages, around 2^53, and counts them', async () => {
    const ps = service().client()
    const ids = Array.from({ length: 2500 }, (_, index) => TWO_53 - 1250n + BigInt(index) * 3n)
    for (let start = 0; start < ids.length; start += 1000) {
      await ps.plants.batch(ids.slice(start, start + 1000).map((id) => ({ method: 'POST' as const, body: { id, name: `walk ${id}`, tag: 'walk' } })))
    }
    let pages = 0
    const walked: bigint[] = []
    for await (const page of ps.plants.pages({ tag: 'walk', pageSize: 300 })) {
      pages++
      walked.push(...page.map((plant) => plant.id))
    }
    expect(pages).toBe(9)
    expect(walked).toEqual(ids)
    const listed = await collected(ps.plants.list({ tag: 'walk' }))
    expect(listed.map((plant) => plant.id)).toEqual(ids)
    expect(listed[1250]).toEqual({ id: TWO_53 + 2500n, name: `walk ${TWO_53 + 2500n}`, tag: 'walk' })
    expect(await ps.plants.count({ tag: 'walk' })).toBe(2500)
  })
})
