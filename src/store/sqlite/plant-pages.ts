import type { SqliteDatabase, Statement } from './driver.js'
import { PLANT_DOCUMENT_SQL, TAGGED_PLANT_DOCUMENT_SQL } from './plant-document-sql.js'
import type { PlantJson } from '../plant-document.js'
import { foldName } from '../plant-names.js'
import { isNameOrder, pageOf, type PageRequest, type PlantFilter, type PlantOrder, type PlantPage } from '../plant-store.js'

/** The trigram index serves a search of at least this many characters (code points); a shorter one reads every name. */
export const INDEXED_SEARCH_LENGTH = 3

/** How a search is read: through the trigram index, by reading every folded name, or not at all. */
type SearchPlan = 'index' | 'scan' | 'none'

/** A search's folded text, and how it is read. */
function searchOf (q: string | undefined): { readonly folded?: string, readonly plan: SearchPlan } {
  if (q === undefined) return { plan: 'none' }
  const folded = foldName(q)
  return { folded, plan: [...folded].length >= INDEXED_SEARCH_LENGTH ? 'index' : 'scan' }
}

const ORDER_BY: Record<PlantOrder, string> = { id: 'id', '-id': 'id DESC', name: 'name, id', '-name': 'name DESC, id DESC' }
const AFTER: Record<PlantOrder, string> = { id: 'id > @afterId', '-id': 'id < @afterId', name: '(name, id) > (@afterName, @afterId)', '-name': '(name, id) < (@afterName, @afterId)' }

/** The conditions of a filter, and of a keyset position, joined by AND. */
function conditions (tagged: boolean, plan: SearchPlan, after: string | undefined): string {
  const all = [
    ...(tagged ? ['tag = @tag'] : []),
    ...(plan === 'index' ? [`id IN (${INDEXED_MATCHES})`] : []),
    ...(plan === 'scan' ? ['instr(name_folded, @folded) > 0'] : []),
    ...(after === undefined ? [] : [after])
  ]
  return all.length === 0 ? '' : `WHERE ${all.join(' AND ')}`
}

/**
 * The ids of the plants a search of three characters or more finds: those the trigram index finds (a
 * phrase matches where its trigrams stand next to each other, exactly where the text holds it), but for
 * the plants the writes noted since the index was last brought up to date (search-index.ts), whose names
 * are read instead.
 */
const INDEXED_MATCHES = 'SELECT rowid FROM plant_name_search WHERE plant_name_search MATCH @phrase ' +
  'EXCEPT SELECT id FROM plant_search_pending ' +
  'UNION SELECT id FROM plant_search_pending JOIN plants USING (id) WHERE instr(plants.name_folded, @folded) > 0'

/** An FTS5 phrase: the text between double quotes, each of its own double quotes doubled. */
function phraseOf (folded: string): string {
  return `"${folded.replaceAll('"', '""')}"`
}

/**
 * Pages and counts of plants, as statements prepared once per shape (order, filters, position) on one
 * connection: the main thread's, for pages read from an index range, and the search thread's, for
 * searches and counts (search-thread.ts). Documents are built by SQLite (plant-document-sql.ts).
 */
export class PlantPages {
  readonly #statements = new Map<string, Statement>()

  constructor (private readonly db: SqliteDatabase) {}

  page (request: PageRequest): PlantPage {
    const tagged = request.tag !== undefined
    const search = searchOf(request.q)
    const order = request.order ?? 'id'
    const { after } = request
    const statement = this.statement(`page ${order} ${tagged} ${search.plan} ${after !== undefined}`, () =>
      `SELECT ${tagged ? TAGGED_PLANT_DOCUMENT_SQL : PLANT_DOCUMENT_SQL} FROM plants ` +
      `${conditions(tagged, search.plan, after === undefined ? undefined : AFTER[order])} ORDER BY ${ORDER_BY[order]} LIMIT @limit`, true)
    const parameters: Record<string, unknown> = { limit: request.limit + 1 }
    if (tagged) parameters.tag = request.tag
    if (search.plan === 'index') parameters.phrase = phraseOf(search.folded as string)
    if (search.plan !== 'none') parameters.folded = search.folded
    if (after !== undefined) {
      if (typeof after === 'bigint') parameters.afterId = after
      else Object.assign(parameters, { afterId: after.id, afterName: after.name })
    }
    const documents = statement.all(parameters) as PlantJson[]
    return pageOf(documents, request, (index) => idOfDocument(documents[index] ?? ''),
      isNameOrder(request) ? (index) => (JSON.parse(documents[index] ?? '') as { name: string }).name : undefined)
  }

  count (filter: PlantFilter): number {
    const tagged = filter.tag !== undefined
    const search = searchOf(filter.q)
    const statement = this.statement(`count ${tagged} ${search.plan}`, () =>
      // A search alone is counted in the search index (and the noted plants), without a look at the others.
      !tagged && search.plan === 'index'
        ? `SELECT count(*) FROM (${INDEXED_MATCHES})`
        : `SELECT count(*) FROM plants ${conditions(tagged, search.plan, undefined)}`, true)
    const parameters: Record<string, unknown> = {}
    if (tagged) parameters.tag = filter.tag
    if (search.plan === 'index') parameters.phrase = phraseOf(search.folded as string)
    if (search.plan !== 'none') parameters.folded = search.folded
    return Number(statement.get(parameters))
  }

  private statement (key: string, sql: () => string, pluck: boolean): Statement {
    let statement = this.#statements.get(key)
    if (statement === undefined) {
      statement = this.db.prepare(sql())
      if (pluck) statement.pluck(true)
      this.#statements.set(key, statement)
    }
    return statement
  }
}

/** The id of a plant's document, which begins `{"id":` and the id. */
export function idOfDocument (json: PlantJson): bigint {
  return BigInt(json.slice(ID_START, json.indexOf(',', ID_START)))
}

const ID_START = '{"id":'.length
