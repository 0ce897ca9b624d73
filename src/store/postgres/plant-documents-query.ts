import pg from 'pg'
import { needsNoEscaping } from '../../json-text.js'
import { plantJson, type PageRequest, type PlantPage } from '../plant-store.js'

/** A DataRow message as the protocol parser hands it over: each field's text, NULL as null. */
interface DataRow { readonly fields: ReadonlyArray<string | null> }

/**
 * A SELECT of `id, name, tag` (in that order) whose rows go straight into text as they arrive: the
 * driver's Result, its row arrays and their type parsers are skipped, and no document is kept apart
 * to be joined later. The fields are the protocol's text, so the id stays the exact decimal it is.
 */
abstract class PlantRowsQuery extends pg.Query {
  constructor (statement: { readonly name: string, readonly text: string }, values: unknown[]) {
    // Given as text, the statement is not a config the driver copies property by property for each query.
    super(statement.text)
    const query = this as unknown as { name: string | undefined, values: unknown[] }
    query.name = statement.name
    query.values = values
  }

  /** Replaces the driver's: no Result is told the columns, whose type parsers would go unused. */
  handleRowDescription (): void {}

  /** Replaces the driver's row handling: no row object, no Result row. */
  handleDataRow (message: DataRow): void {
    const { fields } = message
    this.addPlant(fields[0] as string, fields[1] as string, fields[2] ?? null)
  }

  protected abstract addPlant (id: string, name: string, tag: string | null): void
}

/**
 * A page of plants (PlantPage) built as its rows arrive; the statement reads `limit + 1` rows to learn
 * whether more follow. The page's text is collected as pieces, most of them the fields' own strings and
 * constants, and joined once: one flat string, where documents built a row at a time and concatenated
 * cost a few hundred bytes of intermediate strings per row.
 */
export class PlantPageQuery extends PlantRowsQuery {
  readonly #pieces: string[]
  #length = 0
  #rows = 0
  #lastId = ''
  readonly #limit: number
  readonly #lines: boolean

  /**
   * @param onSent called when the statement is written to a connection: from then on it sees the plants
   *   committed before that moment, and none that a request arriving later must see may be missing from it
   */
  constructor (statement: { readonly name: string, readonly text: string }, values: unknown[], request: PageRequest, onSent?: () => void) {
    super(statement, values)
    if (onSent !== undefined) {
      const send = this.submit
      this.submit = (connection) => {
        onSent()
        return send.call(this, connection)
      }
    }
    this.#limit = request.limit
    this.#lines = request.lines === true
    // Room for a page of plants with tags (the most pieces a row has), so that it never grows.
    this.#pieces = new Array<string>(request.limit * PIECES_PER_ROW + 2)
    if (!this.#lines) this.#pieces[this.#length++] = '['
  }

  protected addPlant (id: string, name: string, tag: string | null): void {
    const row = this.#rows++
    if (row >= this.#limit) return
    this.#lastId = id
    const pieces = this.#pieces
    let at = this.#length
    pieces[at++] = row === 0 || this.#lines ? '{"id":' : ',{"id":'
    pieces[at++] = id
    pieces[at++] = ',"name":'
    at = putJsonString(pieces, at, name)
    if (tag !== null) {
      pieces[at++] = ',"tag":'
      at = putJsonString(pieces, at, tag)
    }
    pieces[at++] = this.#lines ? '}\n' : '}'
    this.#length = at
  }

  /** The page, once the query has completed. */
  page (): PlantPage {
    if (!this.#lines) this.#pieces[this.#length++] = ']'
    // The room a page with fewer rows or tags did not use: join would walk every empty slot of it.
    this.#pieces.length = this.#length
    const json = this.#pieces.join('')
    return this.#rows > this.#limit ? { json, nextAfter: BigInt(this.#lastId) } : { json }
  }
}

/** The most pieces one row adds: `{"id":`, id, `,"name":`, a quoted name (3), `,"tag":`, a quoted tag (3), `}`. */
const PIECES_PER_ROW = 11

/** Puts `JSON.stringify(text)` at `at` as pieces (the text itself between quotes when it needs no escaping); returns where the next piece goes. */
function putJsonString (pieces: string[], at: number, text: string): number {
  if (!needsNoEscaping(text)) {
    pieces[at] = JSON.stringify(text)
    return at + 1
  }
  pieces[at] = '"'
  pieces[at + 1] = text
  pieces[at + 2] = '"'
  return at + 3
}

/** Plants by id: each plant's JSON document by its id. */
export class PlantDocumentsQuery extends PlantRowsQuery {
  readonly documents = new Map<bigint, string>()

  protected addPlant (id: string, name: string, tag: string | null): void {
    this.documents.set(BigInt(id), plantJson(id, name, tag))
  }
}
