/**
 * `GET /plants` with `sort`, `q`, `tag`, `limit` and `Prefer: count=exact`, held to a small reference
 * written here from API.md's words alone: random plants (astral characters, combining marks, `ß`, `Σ`/`ς`,
 * `İ`, `%`, `_`, `\`, names equal but for case), random listings, every page followed through its `Link`
 * and compared byte for byte, on every backend, and the count on every page.
 */
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { backends, bearer, buildTestApp, postPlant } from '../helpers/app.js'

const FUZZ = { seed: Number(process.env.FUZZ_SEED ?? 20261127), numRuns: Number(process.env.FUZZ_RUNS ?? 15) }

interface Plant { readonly id: bigint, readonly name: string, readonly tag?: string }
interface Listing { readonly sort?: string, readonly q?: string, readonly tag?: string, readonly limit: number, readonly count: boolean }

/** The fold API.md defines, and the order of UTF-8 bytes: the reference's own, not the service's. */
const fold = (text: string) => text.normalize('NFC').toUpperCase().toLowerCase()
const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'))
const byId = (a: Plant, b: Plant) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0

function expectedPlants (plants: readonly Plant[], { sort, q, tag }: Listing): Plant[] {
  const matching = plants.filter((plant) => (tag === undefined || plant.tag === tag) && (q === undefined || fold(plant.name).includes(fold(q))))
  switch (sort ?? 'id') {
    case 'id': return matching.sort(byId)
    case '-id': return matching.sort((a, b) => byId(b, a))
    case 'name': return matching.sort((a, b) => byBytes(a.name, b.name) || byId(a, b))
    default: return matching.sort((a, b) => byBytes(b.name, a.name) || byId(b, a))
  }
}

const documentOf = (plant: Plant) =>
  `{"id":${plant.id},"name":${JSON.stringify(plant.name)}${plant.tag === undefined ? '' : `,"tag":${JSON.stringify(plant.tag)}`}}`

/** Pieces names are made of: case pairs, folds that change length, combining marks, astral characters, and what LIKE would read. */
const NAME_PIECES = [
  'a', 'A', 'fern', 'Fern', 'FERN', 'ß', 'SS', 'ss', 'Straße', 'STRASSE', 'Σ', 'σ', 'ς', 'ΟΔΟΣ', 'İ', 'i', 'I', 'ı', 'é', 'e\u0301', 'É',
  'дом', 'ДОМ', 'ﬀ', 'ǅ', '%', '_', '\\', '*', ' ', 'z',
  // Where UTF-16 order and code point order part: astral characters against U+E000–U+FFFF, each twice as likely.
  '😀', '𝔘', '\uE000', '\uFFFD', '😀', '𝔘', '\uE000', '\uFFFD'
]
const name = fc.array(fc.constantFrom(...NAME_PIECES), { minLength: 1, maxLength: 4 }).map((pieces) => pieces.join(''))
const tag = fc.option(fc.constantFrom('shade', 'sun', ''), { nil: undefined })
const id = fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.bigInt({ min: -20n, max: 20n }))
const plants = fc.uniqueArray(fc.record({ id, name, tag }), { selector: (plant) => plant.id, minLength: 0, maxLength: 25 })
  .map((generated) => generated.map((plant) => plant.tag === undefined ? { id: plant.id, name: plant.name } : plant as Plant))
const listing: fc.Arbitrary<Listing> = fc.record({
  sort: fc.option(fc.constantFrom('id', '-id', 'name', '-name'), { nil: undefined }),
  q: fc.option(fc.array(fc.constantFrom(...NAME_PIECES), { minLength: 1, maxLength: 2 }).map((pieces) => pieces.join('')), { nil: undefined }),
  tag,
  limit: fc.integer({ min: 1, max: 6 }),
  count: fc.boolean()
}).map((generated) => Object.fromEntries(Object.entries(generated).filter(([, value]) => value !== undefined)) as unknown as Listing)

function firstPageUrl ({ sort, q, tag, limit }: Listing): string {
  const parameters = new URLSearchParams({ limit: String(limit) })
  if (sort !== undefined) parameters.set('sort', sort)
  if (tag !== undefined) parameters.set('tag', tag)
  if (q !== undefined) parameters.set('q', q)
  return `/plants?${parameters.toString().replaceAll('+', '%20')}`
}

/** Follows the `next` links from the first page, checking every page against the reference. */
async function walk (app: FastifyInstance, stored: readonly Plant[], query: Listing): Promise<void> {
  const expected = expectedPlants(stored, query)
  const headers = { ...bearer(), ...(query.count ? { prefer: 'count=exact' } : {}) }
  let url: string | undefined = firstPageUrl(query)
  let offset = 0
  const head = await app.inject({ method: 'HEAD', url, headers })
  for (let pages = 0; url !== undefined; pages++) {
    expect(pages).toBeLessThanOrEqual(expected.length)
    const response = await app.inject({ method: 'GET', url, headers })
    const page = expected.slice(offset, offset + query.limit)
    offset += page.length
    expect({ url, status: response.statusCode, body: response.body }).toEqual({ url, status: 200, body: `[${page.map(documentOf).join(',')}]` })
    expect(response.headers['x-total-count']).toBe(query.count ? String(expected.length) : undefined)
    expect(response.headers['preference-applied']).toBe(query.count ? 'count=exact' : undefined)
    const link = response.headers.link as string | undefined
    if (offset < expected.length) {
      expect(link).toMatch(/^<\/plants\?limit=\d+.*>; rel="next"$/)
      const next = new URL(`http://plants${(link as string).slice(1, link?.indexOf('>'))}`)
      expect({ sort: next.searchParams.get('sort') ?? undefined, tag: next.searchParams.get('tag') ?? undefined, q: next.searchParams.get('q') ?? undefined })
        .toEqual({ sort: query.sort, tag: query.tag, q: query.q })
      expect(next.searchParams.has(query.sort === 'name' || query.sort === '-name' ? 'cursor' : 'after')).toBe(true)
    } else {
      expect(link).toBeUndefined()
    }
    if (pages === 0) {
      expect({ status: head.statusCode, body: head.body, link: head.headers.link, count: head.headers['x-total-count'] })
        .toEqual({ status: 200, body: '', link, count: response.headers['x-total-count'] })
    }
    url = link === undefined ? undefined : link.slice(1, link.indexOf('>'))
  }
  expect(offset).toBe(expected.length)
}

describe.each(backends)('Finding plants on $name', (backend) => {
  it('gives every listing of random plants page by page as the reference does, its links and counts too', async () => {
    await fc.assert(fc.asyncProperty(plants, fc.array(listing, { minLength: 1, maxLength: 8 }), async (stored, listings) => {
      const app = await buildTestApp({ store: await backend.open() })
      for (const plant of stored) {
        const response = await postPlant(app, documentOf(plant))
        expect(response.statusCode).toBe(200)
      }
      for (const query of listings) await walk(app, stored, query)
      await app.close()
    }), FUZZ)
  }, 120_000)
})
