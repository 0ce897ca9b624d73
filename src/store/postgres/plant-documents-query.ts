import { plantJson } from '../plant-document.js'
import { needsNoEscaping } from '../../json-text.js'
import { isNameOrder, type PageRequest, type PlantPage } from '../plant-store.js'
import { TextRowsQuery } from './text-rows-query.js'

/**
 * Writes plantJson's bytes into `parts` from `length` on, `{"id":…,"name":…}` or `{"id":…,"name":…,"tag":…}`,
 * each string as jsonString writes it (as it is between quotes when it needs no escaping, else
 * JSON.stringify's), as pieces of a page joined once: no document is a string of its own. The new length.
 */
export function writePlantParts (parts: string[], start: number, id: string, name: string, tag: string | null): number {
  let length = start
  parts[length++] = '{"id":'
  parts[length++] = id
  const plainName = needsNoEscaping(name)
  parts[length++] = plainName ? ',"name":"' : ',"name":'
  parts[length++] = plainName ? name : JSON.stringify(name)
  if (tag === null) {
    parts[length++] = plainName ? '"}' : '}'
  } else {
    const plainTag = needsNoEscaping(tag)
    parts[length++] = plainName ? (plainTag ? '","tag":"' : '","tag":') : (plainTag ? ',"tag":"' : ',"tag":')
    parts[length++] = plainTag ? tag : JSON.stringify(tag)
    parts[length++] = plainTag ? '"}' : '}'
  }
  return length
}

/** A SELECT of `id, name, tag` (in that order) whose rows become documents as they arrive. */
abstract class PlantRowsQuery extends TextRowsQuery {
  protected addRow (fields: ReadonlyArray<string | null>): void {
    this.addPlant(fields[0] as string, fields[1] as string, fields[2] ?? null)
  }

  protected abstract addPlant (id: string, name: string, tag: string | null): void
}

/**
 * A page of plants (PlantPage) built as its rows arrive, into one list of string parts joined once at the
 * end into the page's text, flat: no plant's document is a string of its own (a string built of pieces is
 * a tree of small objects, one a piece, that an answer in flight keeps alive through collections, and
 * that a join copies again), and the brackets are not added around the joined text (a tree again, copied
 * whole when the answer is written). The statement reads `limit + 1` rows to learn whether more follow.
 */
export class PlantPageQuery extends PlantRowsQuery {
  readonly #request: PageRequest
  readonly #lines: boolean
  /**
   * `[`, then the documents' parts, with a separator before each but the first: the first #length of
   * them, in an array made as long as a full page's parts at once (growing one would copy it over and over).
   */
  readonly #parts: string[]
  #length: number
  #count = 0
  /** The length of #parts before the separator of the plant read to learn that more follow. */
  #cut = 0
  /** The id and name of the page's last plant, where the next page starts. */
  #lastId = ''
  #lastName = ''

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
    this.#request = request
    this.#lines = request.lines === true
    // A plant's document is 7 parts at most, 8 with its separator; one more plant than the limit is read; and the brackets.
    this.#parts = new Array<string>(2 + (request.limit + 1) * 8)
    this.#length = 0
    if (!this.#lines) this.#parts[this.#length++] = '['
  }

  protected addPlant (id: string, name: string, tag: string | null): void {
    const parts = this.#parts
    let length = this.#length
    const index = this.#count++
    const { limit } = this.#request
    if (index === limit) this.#cut = length
    if (index > 0) parts[length++] = this.#lines ? '\n' : ','
    if (index === limit - 1) {
      this.#lastId = id
      this.#lastName = name
    }
    length = writePlantParts(parts, length, id, name, tag)
    this.#length = length
  }

  /** The page, once the query has completed: as pageOf makes it of the plants' documents. */
  page (): PlantPage {
    const { limit } = this.#request
    const parts = this.#parts
    const more = this.#count > limit
    let length = more ? this.#cut : this.#length
    if (!this.#lines) parts[length++] = ']'
    else if (this.#count > 0) parts[length++] = '\n'
    parts.length = length
    const json = parts.join('')
    if (!more) return { json }
    const nextAfter = BigInt(this.#lastId)
    return isNameOrder(this.#request) ? { json, nextAfter, nextName: this.#lastName } : { json, nextAfter }
  }
}

/** Plants by id: each plant's JSON document by its id. */
export class PlantDocumentsQuery extends PlantRowsQuery {
  readonly documents = new Map<bigint, string>()

  protected addPlant (id: string, name: string, tag: string | null): void {
    this.documents.set(BigInt(id), plantJson(id, name, tag))
  }
}
