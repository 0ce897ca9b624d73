import { invalidRequest } from '../errors.js'
import { DEFAULT_PAGE_SIZE } from '../schemas/kinds.js'
import type { PlantListQuery } from '../schemas/plants.js'
import { isNameOrder, type PageRequest, type PlantFilter, type PlantOrder, type PlantPage, type PlantStore } from '../store/plant-store.js'
import { decodePageCursor, encodePageCursor, type CursorScope } from './page-cursor.js'

/** A `GET /plants` request as the route reads it: the page it asks the store for, and what it told. */
export interface PlantListing {
  readonly page: PageRequest
  readonly sort: PlantOrder
  /** Whether `sort` was given (the next page's link repeats what was given). */
  readonly sortGiven: boolean
  /** Whether the plants matching the filter are counted too (`Prefer: count=exact`). */
  readonly counted: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A plant listing's sort, search and count, for its log line and metrics; null on other requests. */
    plantListing: PlantListing | null
  }
}

/**
 * The listing a validated query asks for. The parameters' combinations are checked here, before any
 * store call: `after` goes with an id order, `cursor` with a name order and the same `q` and `tag`.
 */
export function listingOf (query: PlantListQuery, counted: boolean): PlantListing {
  const sort = query.sort ?? 'id'
  const limit = query.limit === undefined ? DEFAULT_PAGE_SIZE : Number(query.limit)
  const filter: PlantFilter = { ...(query.tag === undefined ? {} : { tag: query.tag }), ...(query.q === undefined ? {} : { q: query.q }) }
  const listing = { sort, sortGiven: query.sort !== undefined, counted }
  if (query.after !== undefined && query.cursor !== undefined) {
    throw invalidRequest('query parameter after cannot go with cursor: a listing by id continues with after, one by name with cursor')
  }
  if (sort === 'name' || sort === '-name') {
    if (query.after !== undefined) {
      throw invalidRequest(`query parameter after goes with sort=id or sort=-id; a listing with sort=${sort} continues with cursor`)
    }
    const after = query.cursor === undefined ? undefined : decodePageCursor({ sort, ...filter }, query.cursor)
    return { ...listing, page: { order: sort, limit, ...filter, ...(after === undefined ? {} : { after }) } }
  }
  if (query.cursor !== undefined) {
    throw invalidRequest(`query parameter cursor continues a listing by name; one with sort=${sort} continues with after`)
  }
  const after = query.after === undefined ? undefined : BigInt(query.after)
  return { ...listing, page: { order: sort, limit, ...filter, ...(after === undefined ? {} : { after }) } }
}

/** The page, and the count when the listing asks for it; the two are read at once. */
export async function readListing (store: PlantStore, listing: PlantListing): Promise<{ page: PlantPage, total?: number }> {
  if (!listing.counted) return { page: await store.list(listing.page) }
  const [page, total] = await Promise.all([store.list(listing.page), store.count(listing.page)])
  return { page, total }
}

/** The path and query of the page after `page`, every parameter given kept; undefined on the last page. */
export function nextPageLink (listing: PlantListing, page: PlantPage): string | undefined {
  if (page.nextAfter === undefined) return undefined
  const { page: request } = listing
  let link = `/plants?limit=${request.limit}`
  if (listing.sortGiven) link += `&sort=${listing.sort}`
  if (isNameOrder(request)) {
    const scope: CursorScope = { sort: request.order, ...filterOf(request) }
    link += `&cursor=${encodePageCursor(scope, { name: page.nextName as string, id: page.nextAfter })}`
  } else {
    link += `&after=${page.nextAfter}`
  }
  if (request.tag !== undefined) link += `&tag=${encodeURIComponent(request.tag)}`
  if (request.q !== undefined) link += `&q=${encodeURIComponent(request.q)}`
  return link
}

function filterOf ({ tag, q }: PlantFilter): PlantFilter {
  return { ...(tag === undefined ? {} : { tag }), ...(q === undefined ? {} : { q }) }
}
