/**
 * `GET /plants` sorted, searched and counted, case by case: the orders and folds API.md names, every
 * refused parameter, `Prefer`, `HEAD`, CORS, the log line and metric of a listing, and cursor walks while
 * plants are written. The model test (plants-finding-model.test.ts) covers random combinations.
 */
import { Writable } from 'node:stream'
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { openMemoryStore } from '../../src/store/memory/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { backends, bearer, buildTestApp, expectError, postPlant } from '../helpers/app.js'

interface TestPlant { readonly id: number, readonly name: string, readonly tag?: string }

const get = (app: FastifyInstance, url: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'GET', url, headers: { ...bearer(), ...headers } })

async function createAll (app: FastifyInstance, plants: readonly TestPlant[]): Promise<void> {
  const responses = await Promise.all(plants.map((plant) => postPlant(app, plant)))
  expect(responses.map((response) => response.statusCode)).toEqual(plants.map(() => 200))
}

/** The ids of a listing, every page followed through its `Link`. */
async function walkIds (app: FastifyInstance, firstUrl: string, headers: Record<string, string> = {}): Promise<number[]> {
  const ids: number[] = []
  let url: string | undefined = firstUrl
  for (let pages = 0; url !== undefined; pages++) {
    expect(pages).toBeLessThan(200)
    const response = await get(app, url, headers)
    expect(response.statusCode).toBe(200)
    ids.push(...(response.json() as TestPlant[]).map((plant) => plant.id))
    const link = response.headers.link as string | undefined
    url = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
  }
  return ids
}

/** Names whose UTF-8 order parts from UTF-16's, from a locale's, and from case: API.md's code point order. */
const ORDER_PLANTS: readonly TestPlant[] = [
  { id: 1, name: '😀 grin' }, { id: 2, name: '\uE000 private' }, { id: 3, name: 'b' }, { id: 4, name: 'a' }, { id: 5, name: 'B' },
  { id: 6, name: 'ä' }, { id: 7, name: 'a\u0301' }, { id: 8, name: 'ß' }, { id: 9, name: 'ss' }, { id: 10, name: 'a' }, { id: 11, name: 'Z' },
  { id: -12, name: 'a' }
]
/** By UTF-8 bytes: `B` 42, `Z` 5A, `a` 61 (ties by id), `a` + U+0301, `b`, `ss`, `ß` C3 9F, `ä` C3 A4, U+E000 EE, U+1F600 F0. */
const BY_NAME = [5, 11, -12, 4, 10, 7, 3, 9, 8, 6, 2, 1]

/** Plants each search of API.md's section must find or miss. */
const SEARCH_PLANTS: readonly TestPlant[] = [
  { id: 1, name: 'Straße' }, { id: 2, name: 'É' }, { id: 3, name: 'e\u0301' }, { id: 4, name: 'ДОМ' }, { id: 5, name: 'ΟΔΟΣ' },
  { id: 6, name: '100% cotton_fern' }, { id: 7, name: 'back\\slash*star' }, { id: 8, name: 'İstanbul' }, { id: 9, name: 'strasse' },
  { id: 10, name: 'Ficus' }
]
const SEARCHES: ReadonlyArray<readonly [q: string, ids: readonly number[]]> = [
  ['strasse', [1, 9]], ['STRASSE', [1, 9]], ['ß', [1, 9]], ['é', [2, 3]], ['É', [2, 3]], ['e\u0301', [2, 3]], ['дом', [4]],
  ['οδος', [5]], ['ΟΔΟΣ', [5]], ['ος', [5]], ['ς', []], ['σ', []], ['%', [6]], ['_', [6]], ['0% c', [6]], ['\\', [7]], ['*', [7]],
  ['h*s', [7]], ['i̇stan', [8]], ['İST', [8]], ['istan', []], ['f', [6, 10]], ['fi', [10]], ['ficus', [10]], ['ficusx', []], ['s', [1, 7, 8, 9, 10]]
]

describe.each(backends)('Finding plants on $name', (backend) => {
  const build = async () => buildTestApp({ store: await backend.open() })

  it('orders names by their code points (UTF-8 bytes), ties by id, and -name exactly the reverse; -id by id descending', async () => {
    const app = await build()
    await createAll(app, ORDER_PLANTS)

    expect(await walkIds(app, '/plants?sort=name&limit=5')).toEqual(BY_NAME)
    // Pages that end inside a run of equal names (the three named `a`), and a page a plant.
    expect(await walkIds(app, '/plants?sort=name&limit=3')).toEqual(BY_NAME)
    expect(await walkIds(app, '/plants?sort=name&limit=1')).toEqual(BY_NAME)
    expect(await walkIds(app, '/plants?sort=-name&limit=2')).toEqual([...BY_NAME].reverse())
    expect(await walkIds(app, '/plants?sort=-name&limit=4')).toEqual([...BY_NAME].reverse())
    expect(await walkIds(app, '/plants?sort=-id&limit=5')).toEqual(ORDER_PLANTS.map((plant) => plant.id).sort((a, b) => b - a))
    expect(await walkIds(app, '/plants?sort=-id&after=5')).toEqual([4, 3, 2, 1, -12])
    expect(await walkIds(app, '/plants?sort=id&after=5&limit=2')).toEqual([6, 7, 8, 9, 10, 11])
  })

  it.each(SEARCHES)('finds with q=%s exactly the plants whose folded name holds it folded', async (q, ids) => {
    const app = await build()
    await createAll(app, SEARCH_PLANTS)

    const response = await get(app, `/plants?q=${encodeURIComponent(q)}`, { prefer: 'count=exact' })

    expect(response.statusCode).toBe(200)
    expect((response.json() as TestPlant[]).map((plant) => plant.id)).toEqual(ids)
    expect(response.headers['x-total-count']).toBe(String(ids.length))
  })

  it('takes a q of 100 characters, counted as characters: 100 seedlings are 200 UTF-16 units', async () => {
    const app = await build()
    const seedlings = '\u{1F331}'.repeat(100)
    await createAll(app, [{ id: 1, name: `${seedlings}!` }, { id: 2, name: '\u{1F331}'.repeat(99) }])

    const response = await get(app, `/plants?q=${encodeURIComponent(seedlings)}`, { prefer: 'count=exact' })

    expect({ status: response.statusCode, body: response.json() as unknown, count: response.headers['x-total-count'] })
      .toEqual({ status: 200, body: [{ id: 1, name: `${seedlings}!` }], count: '1' })
  })

  it('continues a name order through an opaque cursor in its Link, keeping every parameter given', async () => {
    const app = await build()
    await createAll(app, [
      { id: 1, name: 'fern b', tag: 'shade' }, { id: 2, name: 'fern a', tag: 'shade' }, { id: 3, name: 'moss', tag: 'shade' },
      { id: 4, name: 'fern c', tag: 'sun' }, { id: 5, name: 'fern d', tag: 'shade' }
    ])

    const first = await get(app, '/plants?sort=name&tag=shade&q=FERN&limit=2', { prefer: 'count=exact' })

    expect(first.json()).toEqual([{ id: 2, name: 'fern a', tag: 'shade' }, { id: 1, name: 'fern b', tag: 'shade' }])
    expect(first.headers).toMatchObject({ 'x-total-count': '3', 'preference-applied': 'count=exact', vary: 'Prefer' })
    const link = first.headers.link as string
    expect(link).toMatch(/^<\/plants\?limit=2&sort=name&cursor=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{16}&tag=shade&q=FERN>; rel="next"$/)
    const second = await get(app, link.slice(1, link.indexOf('>')), { prefer: 'count=exact' })
    expect(second.json()).toEqual([{ id: 5, name: 'fern d', tag: 'shade' }])
    expect(second.headers.link).toBeUndefined()
    expect(second.headers['x-total-count']).toBe('3')
  })

  it('answers HEAD with the headers GET has (Link, X-Total-Count, ETag) and no body', async () => {
    const app = await build()
    await createAll(app, [{ id: 1, name: 'a' }, { id: 2, name: 'b' }])

    const list = await app.inject({ method: 'HEAD', url: '/plants?limit=1&sort=-id', headers: { ...bearer(), prefer: 'count=exact' } })
    const plant = await app.inject({ method: 'HEAD', url: '/plants/2', headers: bearer() })
    const missing = await app.inject({ method: 'HEAD', url: '/plants/3', headers: bearer() })

    expect({ status: list.statusCode, body: list.body, link: list.headers.link, count: list.headers['x-total-count'] })
      .toEqual({ status: 200, body: '', link: '</plants?limit=1&sort=-id&after=2>; rel="next"', count: '2' })
    expect({ status: plant.statusCode, body: plant.body, etag: plant.headers.etag }).toEqual({ status: 200, body: '', etag: expect.stringMatching(/^"/) })
    expect({ status: missing.statusCode, body: missing.body }).toEqual({ status: 404, body: '' })
  })

  it('walks every plant present throughout exactly once, in order, while others are created, renamed and deleted', async () => {
    const app = await build()
    const steady = Array.from({ length: 40 }, (_, index) => ({ id: index * 10, name: `plant ${String(index).padStart(2, '0')}` }))
    const moving = Array.from({ length: 20 }, (_, index) => ({ id: index * 10 + 5, name: `plant ${String(index * 2).padStart(2, '0')}x` }))
    await createAll(app, [...steady, ...moving])
    const seen: number[] = []
    let url: string | undefined = '/plants?sort=name&limit=3'
    for (let page = 0; url !== undefined; page++) {
      const response = await get(app, url)
      seen.push(...(response.json() as TestPlant[]).map((plant) => plant.id))
      const link = response.headers.link as string | undefined
      url = link === undefined ? undefined : link.slice(1, link.indexOf('>'))
      // Between pages: a new plant, a moving one renamed to the other end of the order, another deleted.
      await postPlant(app, { id: 1000 + page, name: `plant ${String(page * 3 % 40).padStart(2, '0')}y` })
      await app.inject({ method: 'PATCH', url: `/plants/${(page % 20) * 10 + 5}`, headers: { ...bearer(), 'content-type': 'application/merge-patch+json' }, payload: `{"name":"${page % 2 === 0 ? 'a' : 'z'} moved"}` })
      if (page % 3 === 0) await app.inject({ method: 'DELETE', url: `/plants/${((page + 7) % 20) * 10 + 5}`, headers: bearer() })
    }

    // A moving plant may be seen twice (renamed to a later place) or not at all: only the steady ones are promised.
    expect(seen.filter((id) => steady.some((plant) => plant.id === id))).toEqual(steady.map((plant) => plant.id))
  })
})

describe('Finding plants: refused parameters', () => {
  /** A store whose reads fail the test: every refusal must come before any store call. */
  function untouchable (): PlantStore {
    const store = openMemoryStore()
    const never = () => { throw new Error('the store was called') }
    return { ...store, list: never, count: never }
  }

  const CURSOR_DAMAGED = 'query parameter cursor is damaged, or was made for another sort, q or tag: take it from the Link header of the listing it continues'

  it.each([
    ['sort=foo', 'query parameter sort must be one of id, -id, name, -name'],
    ['sort=NAME', 'query parameter sort must be one of id, -id, name, -name'],
    ['sort=', 'query parameter sort must be one of id, -id, name, -name'],
    ['sort=name&sort=id', 'query parameter sort is given more than once; give it once'],
    ['q=', 'query parameter q must be at least 1 character long'],
    [`q=${'x'.repeat(101)}`, 'query parameter q must be at most 100 characters long'],
    [`q=${'%F0%9F%8C%B1'.repeat(101)}`, 'query parameter q must be at most 100 characters long'],
    ['q=a%00b', 'query parameter q must not contain U+0000 or unpaired surrogates'],
    ['q=%FF', 'query parameter q is not valid percent-encoded UTF-8'],
    ['sort=name&after=5', 'query parameter after goes with sort=id or sort=-id; a listing with sort=name continues with cursor'],
    ['sort=-name&after=5', 'query parameter after goes with sort=id or sort=-id; a listing with sort=-name continues with cursor'],
    ['sort=name&after=5&cursor=x.y', 'query parameter after cannot go with cursor: a listing by id continues with after, one by name with cursor'],
    ['after=5&cursor=x.y', 'query parameter after cannot go with cursor: a listing by id continues with after, one by name with cursor'],
    ['cursor=x.y', 'query parameter cursor continues a listing by name; one with sort=id continues with after'],
    ['sort=-id&cursor=x.y', 'query parameter cursor continues a listing by name; one with sort=-id continues with after'],
    ['sort=name&cursor=', 'query parameter cursor must be at least 1 character long'],
    ['sort=name&cursor=nodot', CURSOR_DAMAGED],
    ['sort=name&cursor=%27%3B%20DROP%20TABLE%20plants%3B--', CURSOR_DAMAGED],
    [`sort=name&cursor=${'a'.repeat(4201)}`, 'query parameter cursor must be at most 4200 characters long']
  ])('refuses %s with a 400 naming the parameter, before any store call', async (query, message) => {
    const app = await buildTestApp({ store: untouchable() })

    expectError(await get(app, `/plants?${query}`), 400, message)
  })

  it('refuses a cursor damaged in any character, or made for another sort, q or tag, before any store call', async () => {
    const app = await buildTestApp()
    await createAll(app, [{ id: 1, name: 'fern' }, { id: 2, name: 'fern moss' }, { id: 3, name: 'ferny' }])
    const link = (await get(app, '/plants?sort=name&q=fern&limit=1')).headers.link as string
    const cursor = new URL(`http://x${link.slice(1, link.indexOf('>'))}`).searchParams.get('cursor') as string
    const guarded = await buildTestApp({ store: untouchable() })

    for (const other of ['sort=-name&q=fern', 'sort=name&q=ferns', 'sort=name', 'sort=name&q=fern&tag=', 'sort=name&q=Fern']) {
      expectError(await get(guarded, `/plants?${other}&cursor=${cursor}`), 400, CURSOR_DAMAGED)
    }
    for (let index = 0; index < cursor.length; index++) {
      const damaged = cursor.slice(0, index) + (cursor[index] === 'A' ? 'B' : 'A') + cursor.slice(index + 1)
      expectError(await get(guarded, `/plants?sort=name&q=fern&cursor=${damaged}`), 400, /^query parameter cursor /)
    }
    expect((await get(app, `/plants?sort=name&q=fern&limit=1&cursor=${cursor}`)).json()).toEqual([{ id: 2, name: 'fern moss' }])
  })

  it('answers any cursor a client makes up with a page or a 400, never another status', async () => {
    const app = await buildTestApp()
    await createAll(app, [{ id: 1, name: 'fern' }, { id: 2, name: 'moss' }])
    const made = fc.oneof(fc.string({ maxLength: 60 }), fc.base64String({ maxLength: 80 }).map((text) => `${text}.${'A'.repeat(16)}`),
      fc.tuple(fc.anything(), fc.anything()).map((payload) => `${Buffer.from(JSON.stringify(payload) ?? '').toString('base64url')}.AAAAAAAAAAAAAAAA`))

    await fc.assert(fc.asyncProperty(made, fc.constantFrom('name', '-name'), async (cursor, sort) => {
      const response = await get(app, `/plants?sort=${sort}&cursor=${encodeURIComponent(cursor)}`)
      expect([200, 400]).toContain(response.statusCode)
      if (response.statusCode === 400) expect(response.json().message).toMatch(/^query parameter cursor /)
    }), { seed: 20261127, numRuns: 300 })
  })
})

describe('Finding plants: Prefer, CORS, and what a listing leaves in logs and metrics', () => {
  it.each([
    ['count=exact', true], ['COUNT=EXACT', true], ['count="exact"', true], ['return=minimal, count=exact', true],
    ['count=exact; handling=lenient', true], [' count = exact ', true], ['count=planned', false], ['count', false],
    ['counts=exact', false], ['respond-async', false]
  ])('with Prefer: %s counts (%s) and says so only then', async (prefer, counted) => {
    const app = await buildTestApp()
    await createAll(app, [{ id: 1, name: 'a' }])

    const response = await get(app, '/plants', { prefer })

    expect(response.headers['x-total-count']).toBe(counted ? '1' : undefined)
    expect(response.headers['preference-applied']).toBe(counted ? 'count=exact' : undefined)
    expect(response.headers.vary).toBe('Prefer')
  })

  it('lets scripts of listed origins send Prefer and read X-Total-Count and Preference-Applied', async () => {
    const app = await buildTestApp({ config: { corsOrigins: ['https://garden.example'] } })

    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/plants',
      headers: { origin: 'https://garden.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization, prefer' }
    })
    const response = await get(app, '/plants', { origin: 'https://garden.example', prefer: 'count=exact' })

    expect(preflight.statusCode).toBe(204)
    expect(String(preflight.headers['access-control-allow-headers']).split(', ')).toContain('Prefer')
    expect(String(response.headers['access-control-expose-headers']).split(', ')).toEqual(expect.arrayContaining(['X-Total-Count', 'Preference-Applied']))
    expect(response.headers.vary).toBe('Origin, Prefer')
  })

  it('logs a listing\'s sort, whether it searched and whether it counted, and never the search text, refused or not', async () => {
    const chunks: string[] = []
    const stream = new Writable({ write (chunk: Buffer, _encoding, done) { chunks.push(chunk.toString()); done() } })
    const app = await buildTestApp({ logStream: stream, config: { logLevel: 'info' } })

    await get(app, '/plants?q=secret%20fern&sort=name', { prefer: 'count=exact' })
    await get(app, '/plants?limit=2')
    await get(app, '/plants?limit=0&q=secret')
    await new Promise(setImmediate)
    const lines = chunks.join('').split('\n').filter((line) => line.includes('request completed')).map((line) => JSON.parse(line) as Record<string, unknown>)

    expect(lines.map(({ url, statusCode, sort, searched, counted }) => ({ url, statusCode, sort, searched, counted }))).toEqual([
      { url: '/plants?q=[redacted]&sort=name', statusCode: 200, sort: 'name', searched: true, counted: true },
      { url: '/plants?limit=2', statusCode: 200, sort: 'id', searched: false, counted: false },
      { url: '/plants?limit=0&q=[redacted]', statusCode: 400, sort: undefined, searched: undefined, counted: undefined }
    ])
    expect(chunks.join('')).not.toContain('secret')
  })

  it('measures listings by sort, search and count in plantstore_plant_list_duration_seconds', async () => {
    const app = await buildTestApp({ config: { metrics: true } })

    await get(app, '/plants?sort=-name&q=fern')
    await get(app, '/plants?sort=-name&q=fern', { prefer: 'count=exact' })
    await get(app, '/plants')
    const text = await app.metrics?.registry.metrics() ?? ''

    expect(text).toContain('plantstore_plant_list_duration_seconds_count{sort="-name",searched="true",counted="false"} 1')
    expect(text).toContain('plantstore_plant_list_duration_seconds_count{sort="-name",searched="true",counted="true"} 1')
    expect(text).toContain('plantstore_plant_list_duration_seconds_count{sort="id",searched="false",counted="false"} 1')
    expect(text).not.toContain('fern')
  })
})
