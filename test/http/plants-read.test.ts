import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, expectError, memoryBackend, postPlant, sharedTestApp, withoutPlants } from '../helpers/app.js'

const ID_PARAMETER_RULE = 'path parameter id must be a canonical decimal integer from -9223372036854775808 to 9223372036854775807'
const MIN = '-9223372036854775808'
const MAX = '9223372036854775807'

const get = (app: FastifyInstance, url: string) => app.inject({ method: 'GET', url, headers: bearer() })
const remove = (app: FastifyInstance, url: string) => app.inject({ method: 'DELETE', url, headers: bearer() })

async function createAll (app: FastifyInstance, ids: readonly string[]): Promise<void> {
  for (const id of ids) {
    const response = await postPlant(app, `{"id":${id},"name":"plant ${id}"}`)
    expect(response.statusCode).toBe(200)
  }
}

/** Follows `rel="next"` links from `firstUrl`, calling `between` after each page; returns every page. */
async function walkPages (app: FastifyInstance, firstUrl: string, between: (pageIndex: number) => Promise<void> = async () => {}) {
  const pages: Array<Array<{ id: number | string }>> = []
  let url: string | undefined = firstUrl
  while (url !== undefined && pages.length < 100) {
    const response = await get(app, url)
    expect(response.statusCode).toBe(200)
    pages.push(JSON.parse(response.body.replace(/"id":(-?\d+)/g, '"id":"$1"')))
    url = /^<([^>]+)>; rel="next"$/.exec(response.headers.link as string ?? '')?.[1]
    await between(pages.length - 1)
  }
  return pages
}

// Tests of one plant share one app per backend (each on ids of its own, or first deleting the int64
// edge it needs); the tests of GET /plants list the whole store, so each builds its own.
describe.each(backends)('Reading, listing and deleting plants on $name', (backend) => {
  const build = async () => buildTestApp({ store: await backend.open() })
  const shared = sharedTestApp(backend)

  describe('GET /plants/{id}', () => {
    it('answers the stored plant with its id, name and tag', async () => {
      const app = shared()
      await postPlant(app, { id: 10, name: 'Monstera', tag: 'tropical' })

      const response = await get(app, '/plants/10')

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('{"id":10,"name":"Monstera","tag":"tropical"}')
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
    })

    it('leaves out a tag that was never given, and keeps an empty one', async () => {
      const app = shared()
      await postPlant(app, { id: 11, name: 'Fern' })
      await postPlant(app, { id: 12, name: 'Fern', tag: '' })

      expect((await get(app, '/plants/11')).body).toBe('{"id":11,"name":"Fern"}')
      expect((await get(app, '/plants/12')).body).toBe('{"id":12,"name":"Fern","tag":""}')
    })

    it.each([MIN, MAX, '9007199254740993', '-9007199254740993'])('finds id %s and writes it with every digit', async (id) => {
      const app = await withoutPlants(shared(), id)
      expect((await postPlant(app, `{"id":${id},"name":"edge"}`)).statusCode).toBe(200)

      const response = await get(app, `/plants/${id}`)

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe(`{"id":${id},"name":"edge"}`)
    })

    it('answers 404 for an id no plant has', async () => {
      const app = shared()

      expectError(await get(app, '/plants/404'), 404, 'no plant has id 404')
    })

    it('answers HEAD like GET, without a body', async () => {
      const app = shared()
      await postPlant(app, { id: 13, name: 'Fern' })

      const response = await app.inject({ method: 'HEAD', url: '/plants/13', headers: bearer() })

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('')
    })

    it.each([
      ['letters', 'abc'],
      ['a fraction', '1.5'],
      ['an exponent', '1e2'],
      ['a plus sign', '+5'],
      ['leading zeros', '007'],
      ['minus zero', '-0'],
      ['one above the largest int64', '9223372036854775808'],
      ['one below the smallest int64', '-9223372036854775809'],
      ['a space', '1%202']
    ])('refuses %s in the path with a 400 naming the parameter', async (_case, id) => {
      const app = shared()

      expectError(await get(app, `/plants/${id}`), 400, ID_PARAMETER_RULE)
    })

    it.each(['GET', 'DELETE'] as const)('refuses %s /plants/, a path without its id, with a 400 saying the id is missing', async (method) => {
      const app = shared()

      expectError(await app.inject({ method, url: '/plants/', headers: bearer() }), 400,
        `path parameter id is missing: the path ends where id belongs (a canonical decimal integer from ${MIN} to ${MAX})`)
    })
  })

  describe('DELETE /plants/{id}', () => {
    it('answers 204 with no body, after which the plant is gone', async () => {
      const app = shared()
      await postPlant(app, { id: 20, name: 'Fern' })

      const deleted = await remove(app, '/plants/20')
      const read = await get(app, '/plants/20')
      const again = await remove(app, '/plants/20')

      expect(deleted.statusCode).toBe(204)
      expect(deleted.body).toBe('')
      expect(deleted.headers['content-type']).toBeUndefined()
      expect(deleted.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
      expectError(read, 404, 'no plant has id 20')
      expectError(again, 404, 'no plant has id 20')
    })

    it('frees the id: the old body creates a new plant, and so does another', async () => {
      const app = shared()
      await postPlant(app, { id: 21, name: 'Fern', tag: 'old' })
      await remove(app, '/plants/21')

      const recreated = await postPlant(app, { id: 21, name: 'Fern', tag: 'old' })
      await remove(app, '/plants/21')
      const replaced = await postPlant(app, { id: 21, name: 'Cactus' })

      expect(recreated.statusCode).toBe(200)
      expect(replaced.statusCode).toBe(200)
      expect((await get(app, '/plants/21')).body).toBe('{"id":21,"name":"Cactus"}')
    })

    it.each([MIN, MAX])('deletes id %s exactly, not a neighbour', async (id) => {
      const neighbour = (BigInt(id) + (id === MIN ? 1n : -1n)).toString()
      const app = await withoutPlants(shared(), id, neighbour)
      await createAll(app, [id, neighbour])

      expect((await remove(app, `/plants/${id}`)).statusCode).toBe(204)
      expect((await get(app, `/plants/${neighbour}`)).statusCode).toBe(200)
    })

    it.each(['12abc', '1.5', '+5', '007', '-0', '9223372036854775808'])('refuses the malformed id %s with a 400', async (id) => {
      const app = shared()

      expectError(await remove(app, `/plants/${id}`), 400, ID_PARAMETER_RULE)
    })
  })

  describe('GET /plants', () => {
    it('answers an empty store with an empty page and no Link', async () => {
      const app = await build()

      const response = await get(app, '/plants')

      expect(response.statusCode).toBe(200)
      expect(response.body).toBe('[]')
      expect(response.headers.link).toBeUndefined()
    })

    it('orders by id ascending, negative and huge ids included, with every digit', async () => {
      const app = await build()
      await createAll(app, [MAX, '5', MIN, '-1', '0', '9007199254740993'])

      const response = await get(app, '/plants')

      expect(response.body).toBe(`[{"id":${MIN},"name":"plant ${MIN}"},{"id":-1,"name":"plant -1"},` +
        '{"id":0,"name":"plant 0"},{"id":5,"name":"plant 5"},{"id":9007199254740993,"name":"plant 9007199254740993"},' +
        `{"id":${MAX},"name":"plant ${MAX}"}]`)
      expect(response.headers.link).toBeUndefined()
    })

    it('links to the next page while more plants remain, and not from a last page that is exactly full', async () => {
      const app = await build()
      await createAll(app, ['1', '2', '3', '4'])

      const first = await get(app, '/plants?limit=2')
      const second = await get(app, '/plants?limit=2&after=2')

      expect(first.json()).toEqual([{ id: 1, name: 'plant 1' }, { id: 2, name: 'plant 2' }])
      expect(first.headers.link).toBe('</plants?limit=2&after=2>; rel="next"')
      expect(second.json()).toEqual([{ id: 3, name: 'plant 3' }, { id: 4, name: 'plant 4' }])
      expect(second.headers.link).toBeUndefined()
    })

    it('pages 100 plants by default', async () => {
      const app = await build()
      await createAll(app, Array.from({ length: 101 }, (_, index) => String(index)))

      const response = await get(app, '/plants')

      expect(response.json()).toHaveLength(100)
      expect(response.headers.link).toBe('</plants?limit=100&after=99>; rel="next"')
      expect((await get(app, '/plants?limit=100&after=99')).json()).toEqual([{ id: 100, name: 'plant 100' }])
    })

    it('takes a cursor that is not an existing id, and cursors at both ends of int64', async () => {
      const app = await build()
      await createAll(app, [MIN, '10', '20', MAX])

      expect((await get(app, '/plants?after=15')).json()).toEqual([{ id: 20, name: 'plant 20' }, expect.anything()])
      expect((await get(app, `/plants?after=${MIN}`)).body).toBe(`[{"id":10,"name":"plant 10"},{"id":20,"name":"plant 20"},{"id":${MAX},"name":"plant ${MAX}"}]`)
      expect((await get(app, `/plants?after=${MAX}`)).body).toBe('[]')
      expect((await get(app, '/plants?limit=1&after=20')).headers.link).toBeUndefined()
      expect((await get(app, '/plants?limit=1')).headers.link).toBe(`</plants?limit=1&after=${MIN}>; rel="next"`)
    })

    it('walks every plant exactly once while plants are deleted and added during the walk', async () => {
      const app = await build()
      const ids = Array.from({ length: 20 }, (_, index) => String(index * 10))
      await createAll(app, ids)
      const deletedDuringWalk = new Set(['40', '150', '190'])

      const pages = await walkPages(app, '/plants?limit=3', async (pageIndex) => {
        if (pageIndex === 1) {
          for (const id of deletedDuringWalk) await remove(app, `/plants/${id}`)
          await createAll(app, ['5', '155'])
        }
      })

      const seen = pages.flat().map((plant) => String(plant.id))
      const presentThroughout = ids.filter((id) => !deletedDuringWalk.has(id))
      expect(new Set(seen).size).toBe(seen.length)
      expect(presentThroughout.every((id) => seen.includes(id))).toBe(true)
      expect(seen).toEqual([...seen].sort((a, b) => Number(BigInt(a) - BigInt(b))))
      expect(seen).toContain('155')
      expect(seen).not.toContain('5')
    })

    it.each([
      ['limit=0', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
      ['limit=1001', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
      ['limit=abc', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
      ['limit=1.5', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
      ['limit=+5', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
      ['limit=05', 'query parameter limit must be a canonical decimal integer from 1 to 1000'],
      ['limit=', 'query parameter limit is empty; give a canonical decimal integer from 1 to 1000, or leave it out'],
      ['limit=1&limit=2', 'query parameter limit is given more than once; give it once'],
      ['after=abc', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`],
      ['after=1e2', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`],
      ['after=', `query parameter after is empty; give a canonical decimal integer from ${MIN} to ${MAX}, or leave it out`],
      ['after=9223372036854775808', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`],
      ['after=-9223372036854775809', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`],
      ['after=+5', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`],
      ['after=007', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`],
      ['after=1.5', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`],
      ['after=-0', `query parameter after must be a canonical decimal integer from ${MIN} to ${MAX}`]
    ])('refuses %s with a 400 naming the parameter', async (query, message) => {
      const app = shared()

      expectError(await get(app, `/plants?${query}`), 400, message)
    })

    it('accepts the largest page and ignores unknown query parameters', async () => {
      const app = await build()
      await createAll(app, ['1'])

      const response = await get(app, '/plants?limit=1000&colour=green')

      expect(response.statusCode).toBe(200)
      expect(response.json()).toEqual([{ id: 1, name: 'plant 1' }])
    })
  })
})

describe('Authentication of the read and delete operations', () => {
  const shared = sharedTestApp(memoryBackend)

  it.each([
    ['GET', '/plants/1'],
    ['GET', '/plants/not-a-number'],
    ['GET', '/plants?limit=abc'],
    ['DELETE', '/plants/1'],
    ['DELETE', '/plants/007'],
    ['HEAD', '/plants'],
    ['GET', '/plants/1/extra']
  ] as const)('refuses %s %s without a token with a 401, before looking at the path or query', async (method, url) => {
    const app = shared()

    const response = await app.inject({ method, url })

    expect(response.statusCode).toBe(401)
    expect(response.headers['www-authenticate']).toBe('Bearer realm="plantstore"')
  })
})
