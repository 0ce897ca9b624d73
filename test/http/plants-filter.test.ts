import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, expectError, postPlant } from '../helpers/app.js'

interface TestPlant { readonly id: number, readonly name: string, readonly tag?: string }

const get = (app: FastifyInstance, url: string) => app.inject({ method: 'GET', url, headers: bearer() })

const put = (app: FastifyInstance, id: number, body: object) => app.inject({
  method: 'PUT', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/json' }, payload: JSON.stringify(body)
})

const patch = (app: FastifyInstance, id: number, body: object) => app.inject({
  method: 'PATCH', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/merge-patch+json' }, payload: JSON.stringify(body)
})

/** Creates the plants concurrently (so they share a group commit), each with a 200. */
async function createAll (app: FastifyInstance, plants: readonly TestPlant[]): Promise<void> {
  const responses = await Promise.all(plants.map((plant) => postPlant(app, plant)))
  expect(responses.map((response) => response.statusCode)).toEqual(plants.map(() => 200))
}

/** The page GET answers for `query`: its exact body (as a value) and its Link header. */
async function pageOf (app: FastifyInstance, query: string): Promise<{ plants: unknown, link: unknown }> {
  const response = await get(app, `/plants?${query}`)
  expect(response.statusCode).toBe(200)
  expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
  return { plants: response.json(), link: response.headers.link }
}

/** Follows `rel="next"` links from `firstUrl`; returns every page's plants and the Link each page had. */
async function walkPages (app: FastifyInstance, firstUrl: string) {
  const pages: Array<{ plants: unknown, link: string | undefined }> = []
  let url: string | undefined = firstUrl
  while (url !== undefined && pages.length < 20) {
    const response = await get(app, url)
    expect(response.statusCode).toBe(200)
    const link = response.headers.link as string | undefined
    pages.push({ plants: response.json(), link })
    url = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
  }
  return pages
}

/** Space, `&`, `%`, `+` and an astral character: a tag that only survives a query string percent-encoded. */
const ODD_TAG = 'a b&c%d+e\u{1F331}'
const ODD_TAG_ENCODED = 'a%20b%26c%25d%2Be%F0%9F%8C%B1'

const NOT_UTF8 = 'query parameter tag is not valid percent-encoded UTF-8'

/** Queries whose tag filter is refused, each with the message of its 400. */
const INVALID_FILTERS: ReadonlyArray<readonly [query: string, message: string]> = [
  [`tag=${'%F0%9F%8C%B1'.repeat(257)}`, 'query parameter tag must be at most 256 characters long'],
  [`tag=${'x'.repeat(257)}`, 'query parameter tag must be at most 256 characters long'],
  ['tag=a%00b', 'query parameter tag must not contain U+0000 or unpaired surrogates'],
  ['tag=%ED%A0%80', NOT_UTF8],
  ['tag=%ED%B0%80x', NOT_UTF8],
  ['tag=%FF', NOT_UTF8],
  ['tag=%C3', NOT_UTF8],
  ['tag=%F0%9F%8C', NOT_UTF8],
  ['tag=ab%2', NOT_UTF8],
  ['tag=%zz', NOT_UTF8],
  ['limit=2&tag=%FF&after=1', NOT_UTF8],
  ['tag=a&tag=b', 'query parameter tag is given more than once; give it once'],
  ['tag=&tag=', 'query parameter tag is given more than once; give it once'],
  ['tag=green&limit=1&tag=green', 'query parameter tag is given more than once; give it once']
]

describe.each(backends)('GET /plants?tag= on $name', (backend) => {
  const build = async () => buildTestApp({ store: await backend.open() })

  it('answers only the plants whose tag is exactly the one asked for, in id order', async () => {
    const app = await build()
    await createAll(app, [
      { id: 5, name: 'Monstera', tag: 'tropical' },
      { id: -2, name: 'Palm', tag: 'tropical' },
      { id: 3, name: 'Bird of paradise', tag: 'Tropical' },
      { id: 4, name: 'Ficus' },
      { id: 7, name: 'Fern', tag: '' },
      { id: 9, name: 'Orchid', tag: 'tropical ' },
      { id: 8, name: 'Banana', tag: 'tropicals' },
      { id: 1, name: 'Croton', tag: 'tropical' }
    ])
    expect((await postPlant(app, '{"id":9007199254740993,"name":"Alocasia","tag":"tropical"}')).statusCode).toBe(200)

    const response = await get(app, '/plants?tag=tropical')

    expect(response.statusCode).toBe(200)
    expect(response.body).toBe('[{"id":-2,"name":"Palm","tag":"tropical"},{"id":1,"name":"Croton","tag":"tropical"},' +
      '{"id":5,"name":"Monstera","tag":"tropical"},{"id":9007199254740993,"name":"Alocasia","tag":"tropical"}]')
    expect(response.headers.link).toBeUndefined()
    expect(await pageOf(app, 'tag=Tropical')).toEqual({ plants: [{ id: 3, name: 'Bird of paradise', tag: 'Tropical' }], link: undefined })
    expect(await pageOf(app, 'tag=TROPICAL')).toEqual({ plants: [], link: undefined })
    expect(await pageOf(app, 'tag=tropical%20')).toEqual({ plants: [{ id: 9, name: 'Orchid', tag: 'tropical ' }], link: undefined })
    expect(await pageOf(app, 'tag=no-such-tag')).toEqual({ plants: [], link: undefined })
  })

  it('selects the empty tag with tag=, and never a plant without a tag', async () => {
    const app = await build()
    await createAll(app, [
      { id: 1, name: 'Ficus' },
      { id: 2, name: 'Fern', tag: '' },
      { id: 3, name: 'Palm', tag: 'tropical' },
      { id: 4, name: 'Cactus', tag: '' },
      { id: 5, name: 'Basil' }
    ])

    expect(await pageOf(app, 'tag=')).toEqual({ plants: [{ id: 2, name: 'Fern', tag: '' }, { id: 4, name: 'Cactus', tag: '' }], link: undefined })
    expect(await pageOf(app, 'tag=&limit=1')).toEqual({ plants: [{ id: 2, name: 'Fern', tag: '' }], link: '</plants?limit=1&after=2&tag=>; rel="next"' })
    expect(await pageOf(app, 'limit=1&after=2&tag=')).toEqual({ plants: [{ id: 4, name: 'Cactus', tag: '' }], link: undefined })
    expect(await pageOf(app, 'tag=null')).toEqual({ plants: [], link: undefined })
    expect(await pageOf(app, 'tag')).toEqual({ plants: [{ id: 2, name: 'Fern', tag: '' }, { id: 4, name: 'Cactus', tag: '' }], link: undefined })
    expect(await pageOf(app, 'limit=1&tag')).toEqual({ plants: [{ id: 2, name: 'Fern', tag: '' }], link: '</plants?limit=1&after=2&tag=>; rel="next"' })
  })

  it('compares tags exactly: no case folding, no Unicode normalisation', async () => {
    const app = await build()
    const astral256 = '\u{1F331}'.repeat(256)
    await createAll(app, [
      { id: 1, name: 'composed', tag: 'Caf\u00E9' },
      { id: 2, name: 'decomposed', tag: 'Cafe\u0301' },
      { id: 3, name: 'sharp s', tag: 'stra\u00DFe' },
      { id: 4, name: 'double s', tag: 'strasse' },
      { id: 5, name: 'longest', tag: astral256 }
    ])

    expect(await pageOf(app, 'tag=Caf%C3%A9')).toEqual({ plants: [{ id: 1, name: 'composed', tag: 'Caf\u00E9' }], link: undefined })
    expect(await pageOf(app, 'tag=Cafe%CC%81')).toEqual({ plants: [{ id: 2, name: 'decomposed', tag: 'Cafe\u0301' }], link: undefined })
    expect(await pageOf(app, 'tag=caf%C3%A9')).toEqual({ plants: [], link: undefined })
    expect(await pageOf(app, 'tag=stra%C3%9Fe')).toEqual({ plants: [{ id: 3, name: 'sharp s', tag: 'stra\u00DFe' }], link: undefined })
    expect(await pageOf(app, 'tag=STRASSE')).toEqual({ plants: [], link: undefined })
    expect(await pageOf(app, `tag=${encodeURIComponent(astral256)}`)).toEqual({ plants: [{ id: 5, name: 'longest', tag: astral256 }], link: undefined })
  })

  it('takes a tag with a space, &, %, + and an astral character when percent-encoded, and + as a space', async () => {
    const app = await build()
    await createAll(app, [
      { id: 1, name: 'odd', tag: ODD_TAG },
      { id: 2, name: 'spaced', tag: 'a b' },
      { id: 3, name: 'plussed', tag: 'a+b' },
      { id: 4, name: 'cut at the ampersand', tag: 'a b&c' }
    ])

    expect(await pageOf(app, `tag=${ODD_TAG_ENCODED}`)).toEqual({ plants: [{ id: 1, name: 'odd', tag: ODD_TAG }], link: undefined })
    expect(await pageOf(app, 'tag=a+b%26c%25d%2Be%F0%9F%8C%B1')).toEqual({ plants: [{ id: 1, name: 'odd', tag: ODD_TAG }], link: undefined })
    expect(await pageOf(app, 'tag=a+b')).toEqual({ plants: [{ id: 2, name: 'spaced', tag: 'a b' }], link: undefined })
    expect(await pageOf(app, 'tag=a%2Bb')).toEqual({ plants: [{ id: 3, name: 'plussed', tag: 'a+b' }], link: undefined })
    expect(await pageOf(app, 'tag=a%20b&c')).toEqual({ plants: [{ id: 2, name: 'spaced', tag: 'a b' }], link: undefined })
  })

  it('keeps the filter in the Link, and following the Links walks every matching plant once, with no Link on a full last page', async () => {
    const app = await build()
    await createAll(app, [
      { id: -5, name: 'first', tag: ODD_TAG },
      { id: -4, name: 'other' },
      { id: 0, name: 'second', tag: ODD_TAG },
      { id: 1, name: 'other', tag: 'a b' },
      { id: 6, name: 'third', tag: ODD_TAG },
      { id: 8, name: 'fourth', tag: ODD_TAG },
      { id: 10, name: 'other', tag: 'a+b&c%d+e\u{1F331}' },
      { id: 11, name: 'other', tag: '' }
    ])

    const pages = await walkPages(app, `/plants?tag=${ODD_TAG_ENCODED}&limit=2`)
    const fromCursor = await pageOf(app, `limit=3&after=-1&tag=${ODD_TAG_ENCODED}`)

    expect(pages).toEqual([
      {
        plants: [{ id: -5, name: 'first', tag: ODD_TAG }, { id: 0, name: 'second', tag: ODD_TAG }],
        link: `</plants?limit=2&after=0&tag=${ODD_TAG_ENCODED}>; rel="next"`
      },
      { plants: [{ id: 6, name: 'third', tag: ODD_TAG }, { id: 8, name: 'fourth', tag: ODD_TAG }], link: undefined }
    ])
    expect(fromCursor).toEqual({
      plants: [{ id: 0, name: 'second', tag: ODD_TAG }, { id: 6, name: 'third', tag: ODD_TAG }, { id: 8, name: 'fourth', tag: ODD_TAG }],
      link: undefined
    })
  })

  it('writes the Link of a tag sent with + for spaces in its percent-encoded form, and walks a partial last page', async () => {
    const app = await build()
    await createAll(app, [1, 2, 3, 4, 5].map((id) => ({ id, name: `plant ${id}`, tag: 'house plant' })))
    await createAll(app, [{ id: 6, name: 'plant 6', tag: 'house' }])

    const pages = await walkPages(app, '/plants?limit=2&tag=house+plant')

    expect(pages).toEqual([
      { plants: [{ id: 1, name: 'plant 1', tag: 'house plant' }, { id: 2, name: 'plant 2', tag: 'house plant' }], link: '</plants?limit=2&after=2&tag=house%20plant>; rel="next"' },
      { plants: [{ id: 3, name: 'plant 3', tag: 'house plant' }, { id: 4, name: 'plant 4', tag: 'house plant' }], link: '</plants?limit=2&after=4&tag=house%20plant>; rel="next"' },
      { plants: [{ id: 5, name: 'plant 5', tag: 'house plant' }], link: undefined }
    ])
  })

  it('moves a plant between filtered pages when PUT or PATCH changes its tag', async () => {
    const app = await build()
    await createAll(app, [
      { id: 1, name: 'Fern', tag: 'indoor' },
      { id: 2, name: 'Palm', tag: 'indoor' },
      { id: 3, name: 'Rose', tag: 'outdoor' }
    ])

    expect((await put(app, 2, { name: 'Palm', tag: 'outdoor' })).statusCode).toBe(200)
    expect(await pageOf(app, 'tag=indoor')).toEqual({ plants: [{ id: 1, name: 'Fern', tag: 'indoor' }], link: undefined })
    expect(await pageOf(app, 'tag=outdoor')).toEqual({
      plants: [{ id: 2, name: 'Palm', tag: 'outdoor' }, { id: 3, name: 'Rose', tag: 'outdoor' }], link: undefined
    })

    expect((await patch(app, 3, { tag: null })).statusCode).toBe(200)
    expect((await patch(app, 1, { tag: 'outdoor' })).statusCode).toBe(200)
    expect(await pageOf(app, 'tag=indoor')).toEqual({ plants: [], link: undefined })
    expect(await pageOf(app, 'tag=outdoor')).toEqual({
      plants: [{ id: 1, name: 'Fern', tag: 'outdoor' }, { id: 2, name: 'Palm', tag: 'outdoor' }], link: undefined
    })

    expect((await put(app, 2, { name: 'Palm' })).statusCode).toBe(200)
    expect((await put(app, 4, { name: 'Ivy', tag: 'indoor' })).statusCode).toBe(201)
    expect((await patch(app, 3, { tag: 'indoor' })).statusCode).toBe(200)
    expect(await pageOf(app, 'tag=outdoor&limit=1')).toEqual({ plants: [{ id: 1, name: 'Fern', tag: 'outdoor' }], link: undefined })
    expect(await pageOf(app, 'tag=indoor')).toEqual({
      plants: [{ id: 3, name: 'Rose', tag: 'indoor' }, { id: 4, name: 'Ivy', tag: 'indoor' }], link: undefined
    })
    expect(await pageOf(app, '')).toEqual({
      plants: [
        { id: 1, name: 'Fern', tag: 'outdoor' }, { id: 2, name: 'Palm' }, { id: 3, name: 'Rose', tag: 'indoor' }, { id: 4, name: 'Ivy', tag: 'indoor' }
      ],
      link: undefined
    })
  })

  it('refuses every filter that breaks the tag rules or is not UTF-8 with a 400 naming it, and the store is as it was', async () => {
    const app = await build()
    await createAll(app, [{ id: 1, name: 'Fern', tag: 'a' }])

    for (const [query, message] of INVALID_FILTERS) expectError(await get(app, `/plants?${query}`), 400, message)
    expect(await pageOf(app, 'tag=a')).toEqual({ plants: [{ id: 1, name: 'Fern', tag: 'a' }], link: undefined })
    expect((await get(app, '/plants/1')).body).toBe('{"id":1,"name":"Fern","tag":"a"}')
  })

  it('ignores a malformed percent-encoding in a parameter it does not know, one named like an Object.prototype member included', async () => {
    const app = await build()
    const both = [{ id: 1, name: 'Fern', tag: 'green' }, { id: 2, name: 'Rose', tag: 'red' }]
    await createAll(app, both)

    expect(await pageOf(app, 'colour=%FF&tag=green')).toEqual({ plants: [both[0]], link: undefined })
    expect(await pageOf(app, 'tag=red&%ED%A0%80=1&x=%')).toEqual({ plants: [both[1]], link: undefined })
    expect(await pageOf(app, 'toString=%FF&tag=green')).toEqual({ plants: [both[0]], link: undefined })
    expect(await pageOf(app, 'tag=red&hasOwnProperty=%C3')).toEqual({ plants: [both[1]], link: undefined })
    expect(await pageOf(app, '__proto__=%FF')).toEqual({ plants: both, link: undefined })
    expect(await pageOf(app, 'constructor=%FF&limit=1')).toEqual({ plants: [both[0]], link: '</plants?limit=1&after=1>; rel="next"' })
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
})

describe('Authentication of a filtered list', () => {
  it.each(['tag=green', 'tag=%FF', 'tag=a&tag=b', `tag=${'x'.repeat(257)}`])('refuses ?%s without a token with a 401, before looking at the filter', async (query) => {
    const app = await buildTestApp()

    const response = await app.inject({ method: 'GET', url: `/plants?${query}` })

    expectError(response, 401, 'this operation needs an "Authorization: Bearer <token>" header')
    expect(response.headers['www-authenticate']).toBe('Bearer realm="plantstore"')
  })
})
