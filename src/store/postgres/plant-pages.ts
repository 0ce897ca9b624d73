import { foldName } from '../plant-names.js'
import type { PageRequest, PlantFilter, PlantOrder } from '../plant-store.js'

/** A prepared statement's name and text, and the values of one run of it. */
export interface BoundStatement {
  readonly statement: { readonly name: string, readonly text: string }
  readonly values: unknown[]
}

/** Names in the "C" collation: the order of their UTF-8 bytes, Unicode code points, as SQLite's BINARY. */
const NAME = 'name COLLATE "C"'
const ORDER_BY: Record<PlantOrder, string> = { id: 'id', '-id': 'id DESC', name: `${NAME}, id`, '-name': `${NAME} DESC, id DESC` }
const COMPARISON: Record<PlantOrder, '>' | '<'> = { id: '>', '-id': '<', name: '>', '-name': '<' }

/**
 * The statement of a page: `id, name, tag` (plant-documents-query.ts makes them documents) of the plants
 * the filter passes, in the order, after the position, `limit + 1` of them to learn whether more follow.
 * A search is read first, whole, through the trigram index when there is one (search-index.ts), and only
 * then ordered: a name order walked along its index, filtered by a rare search, would read every name.
 */
export function pageStatement (request: PageRequest): BoundStatement {
  const order = request.order ?? 'id'
  const values: unknown[] = []
  const parameter = (value: unknown) => `$${values.push(value)}`
  const where: string[] = []
  if (request.tag !== undefined) where.push(`tag = ${parameter(request.tag)}`)
  if (request.q !== undefined) where.push(`name_folded LIKE ${parameter(likePattern(request.q))}`)
  const { after } = request
  const position = after === undefined
    ? undefined
    : typeof after === 'bigint'
      ? `id ${COMPARISON[order]} ${parameter(after.toString())}`
      : `(${NAME}, id) ${COMPARISON[order]} (${parameter(after.name)}, ${parameter(after.id.toString())})`
  const limit = parameter(request.limit + 1)
  const shape = `${order}${request.tag === undefined ? '' : '-tag'}${request.q === undefined ? '' : '-search'}${after === undefined ? '' : '-after'}`
  const text = request.q === undefined
    ? `SELECT id, name, tag FROM plants ${whereOf([...where, ...(position === undefined ? [] : [position])])} ORDER BY ${ORDER_BY[order]} LIMIT ${limit}`
    : `WITH found AS MATERIALIZED (SELECT id, name, tag FROM plants ${whereOf(where)}) ` +
      `SELECT id, name, tag FROM found ${whereOf(position === undefined ? [] : [position])} ORDER BY ${ORDER_BY[order]} LIMIT ${limit}`
  return { statement: { name: `plantstore-page-${shape}`, text }, values }
}

/** The statement that counts the plants a filter passes. */
export function countStatement (filter: PlantFilter): BoundStatement {
  const values: unknown[] = []
  const where: string[] = []
  if (filter.tag !== undefined) where.push(`tag = $${values.push(filter.tag)}`)
  if (filter.q !== undefined) where.push(`name_folded LIKE $${values.push(likePattern(filter.q))}`)
  const shape = `${filter.tag === undefined ? 'all' : 'tag'}${filter.q === undefined ? '' : '-search'}`
  return { statement: { name: `plantstore-count-${shape}`, text: `SELECT count(*) AS count FROM plants ${whereOf(where)}` }, values }
}

function whereOf (conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`
}

/** `LIKE '%q%'` of the folded search text, its `%`, `_` and `\` ordinary characters (LIKE's escape is `\`). */
function likePattern (q: string): string {
  return `%${foldName(q).replace(/[\\%_]/g, '\\$&')}%`
}
