import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { StoreUnavailableError, type PlantRecord, type PlantStore } from '../../../src/store/plant-store.js'
import { backends, bearer, buildTestApp, expectError, postPlant, TEST_TOKEN } from '../../helpers/app.js'

const ADMIN_TOKEN = 'export-admin-token-4b7e19'
const TOKENS = [`name=ops;scopes=admin;${ADMIN_TOKEN}`, TEST_TOKEN]
const NDJSON = 'application/x-ndjson'

const exportPlants = (app: FastifyInstance, query = '', token = ADMIN_TOKEN) =>
  app.inject({ method: 'GET', url: `/admin/export${query}`, headers: bearer(token) })

/** `count` plants with ids from `first`, created through the store's batched writes. */
async function createPlants (store: PlantStore, first: number, count: number, tag?: string): Promise<void> {
  const plants: PlantRecord[] = Array.from({ length: count }, (_, index) => ({
    id: BigInt(first + index), name: `plant ${first + index}`, ...(tag === undefined ? {} : { tag })
  }))
  const outcomes = await Promise.all(plants.map((plant) => store.create(plant)))
  expect(outcomes.every((outcome) => outcome.status === 'created')).toBe(true)
}

const line = (id: number | string, name: string, tag?: string) =>
  `${JSON.stringify({ id: 0, name, ...(tag === undefined ? {} : { tag }) }).replace('"id":0', `"id":${id}`)}\n`

describe.each(backends)('GET /admin/export on $name', (backend) => {
  it('Given an empty store, When it is exported, Then the answer is a 200 with an empty NDJSON body', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: TOKENS })

    const response = await exportPlants(app)

    expect({ status: response.statusCode, type: response.headers['content-type'], cache: response.headers['cache-control'], body: response.body })
      .toEqual({ status: 200, type: NDJSON, cache: 'no-store', body: '' })
  })

  it('Given plants with extreme ids, no tag, an empty tag and escapes, When exported, Then each is one line as GET shows it, by id', async () => {
    const app = await buildTestApp({ store: await backend.open(), tokens: TOKENS })
    for (const body of [
      '{"id":9223372036854775807,"name":"max","tag":"t"}',
      '{"id":-9223372036854775808,"name":"min"}',
      '{"id":0,"name":"zero","tag":""}',
      '{"id":7,"name":"quote \\" and line\\nfeed 🌱","tag":"t"}'
    ]) expect((await postPlant(app, body)).statusCode).toBe(200)
    const read = await app.inject({ method: 'GET', url: '/plants/7', headers: bearer() })

    const response = await exportPlants(app)

    expect(response.statusCode).toBe(200)
    expect(response.body).toBe(
      '{"id":-9223372036854775808,"name":"min"}\n' +
      '{"id":0,"name":"zero","tag":""}\n' +
      `${read.body}\n` +
      '{"id":9223372036854775807,"name":"max","tag":"t"}\n')
    expect(read.body).toBe('{"id":7,"name":"quote \\" and line\\nfeed 🌱","tag":"t"}')
  })

  it('Given plants of several tags over more than two pages, When exported by tag, Then only that tag\'s plants come, each once, in order', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store, tokens: TOKENS })
    await createPlants(store, 1, 1500, 'a')
    await createPlants(store, 1501, 1200, 'b')
    await createPlants(store, 2701, 3)

    const all = await exportPlants(app)
    const tagged = await exportPlants(app, '?tag=b')
    const empty = await exportPlants(app, '?tag=')

    const expectedAll = Array.from({ length: 2703 }, (_, index) => line(index + 1, `plant ${index + 1}`, index < 1500 ? 'a' : index < 2700 ? 'b' : undefined)).join('')
    expect(all.body).toBe(expectedAll)
    expect(tagged.body).toBe(Array.from({ length: 1200 }, (_, index) => line(index + 1501, `plant ${index + 1501}`, 'b')).join(''))
    expect({ status: empty.statusCode, body: empty.body }).toEqual({ status: 200, body: '' })
  })
})

describe('GET /admin/export: who may, and bad queries', () => {
  it('answers 401 without a valid token and 403 for a token without the admin scope, before anything is read', async () => {
    const app = await buildTestApp({ tokens: TOKENS })

    const anonymous = await app.inject({ method: 'GET', url: '/admin/export' })
    const plantsOnly = await exportPlants(app, '', TEST_TOKEN)

    expectError(anonymous, 401, 'this operation needs an "Authorization: Bearer <token>" header')
    expectError(plantsOnly, 403, 'this token lacks the scope "admin", which this operation needs')
  })

  it('answers 400 for a tag that breaks the tag rule, and 405 for another method', async () => {
    const app = await buildTestApp({ tokens: TOKENS })

    const long = await exportPlants(app, `?tag=${'x'.repeat(257)}`)
    const post = await app.inject({ method: 'POST', url: '/admin/export', headers: bearer(ADMIN_TOKEN) })

    expectError(long, 400, 'query parameter tag must be at most 256 characters long')
    expect(post.statusCode).toBe(405)
    expect(post.headers.allow).toBe('GET, HEAD')
  })
})

describe('GET /admin/export while the store fails or changes', () => {
  it('Given a store that cannot be read, When exported, Then the answer is a 503 Error, not an empty export', async () => {
    const store = await backends[1]!.open()
    const failing: PlantStore = { ...store, list: async () => { throw new StoreUnavailableError('SQLite cannot be read (disk I/O error)') } }
    const app = await buildTestApp({ store: failing, tokens: TOKENS })

    const response = await exportPlants(app)

    expectError(response, 503, `storage is unavailable, retry later; request id ${String(response.headers['x-request-id'])}`)
    expect(response.headers['retry-after']).toBe('1')
    await store.close()
  })

  it('Given a store that fails after the first page, When exported over a socket, Then the body is cut off without its end, so it cannot pass for complete', async () => {
    const store = await backends[1]!.open()
    await createPlants(store, 1, 1001)
    const failing: PlantStore = {
      ...store,
      list: async (page) => {
        if (page.after !== undefined) throw new StoreUnavailableError('SQLite cannot be read (disk I/O error)')
        return store.list(page)
      }
    }
    const app = await buildTestApp({ store: failing, tokens: TOKENS })
    const address = await app.listen({ port: 0, host: '127.0.0.1' })

    const response = await fetch(`${address}/admin/export`, { headers: bearer(ADMIN_TOKEN) })
    const body = response.text()

    expect(response.status).toBe(200)
    await expect(body).rejects.toThrow(/terminated/)
    await store.close()
  })

  it('Given plants deleted before the export, When it runs, Then they are not in it, and their neighbours are', async () => {
    const store = await backends[1]!.open()
    await createPlants(store, 1, 1500)
    for (const id of [1n, 1000n, 1001n, 1500n]) expect(await store.delete(id)).toEqual({ status: 'deleted' })
    const app = await buildTestApp({ store, tokens: TOKENS })

    const response = await exportPlants(app)

    const ids = response.body.trimEnd().split('\n').map((text) => Number(/^\{"id":(\d+),/.exec(text)?.[1]))
    expect(ids).toEqual(Array.from({ length: 1500 }, (_, index) => index + 1).filter((id) => ![1, 1000, 1001, 1500].includes(id)))
  })

  it('Given writes while a long export streams, When it ends, Then every plant stored before it began is in it exactly once, in id order', async () => {
    const store = await backends[1]!.open()
    await createPlants(store, 1, 5000)
    const app = await buildTestApp({ store, tokens: TOKENS })
    const address = await app.listen({ port: 0, host: '127.0.0.1' })

    const exported = fetch(`${address}/admin/export`, { headers: bearer(ADMIN_TOKEN) }).then(async (response) => response.text())
    const writes = Promise.all(Array.from({ length: 200 }, (_, index) => store.create({ id: BigInt(-index - 1), name: 'late' })))
    const [body] = await Promise.all([exported, writes])

    const ids = body.trimEnd().split('\n').map((text) => BigInt(/^\{"id":(-?\d+),/.exec(text)?.[1] ?? 'x'))
    const before = ids.filter((id) => id > 0n)
    expect(before).toEqual(Array.from({ length: 5000 }, (_, index) => BigInt(index + 1)))
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)))
    expect(new Set(ids).size).toBe(ids.length)
  })
})
