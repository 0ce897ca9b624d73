import { isoTime } from '../change-document.js'
import { TYPE_OF_CODE, type ChangeFeedJsonPage } from '../change-log.js'
import { writePlantParts } from './plant-documents-query.js'
import { TextRowsQuery } from './text-rows-query.js'

/**
 * A page of the feed as the route answers it, changeJson's bytes built as its rows arrive from a statement
 * selecting `pruned, first_at, seq, type, plant_id, name, tag, committed_at` (changes.ts): the first two
 * tell whether the resume point is expired and stand on every row; a page without changes is one row
 * whose change fields are null. As a plant page (plant-documents-query.ts), the documents are pieces of
 * one list joined once at the end: no change's document is a string of its own.
 */
export class ChangePageQuery extends TextRowsQuery {
  readonly #parts: string[]
  #length = 1
  #pruned = 0n
  #firstAt: number | undefined
  #rows = 0
  #lastSeq: string | undefined

  constructor (statement: { readonly name: string, readonly text: string }, values: unknown[], limit: number) {
    super(statement, values)
    // A change's document is 18 parts at most, with its separator; and the brackets.
    this.#parts = new Array<string>(2 + limit * 18)
    this.#parts[0] = '['
  }

  protected addRow (fields: ReadonlyArray<string | null>): void {
    if (this.#rows++ === 0) {
      this.#pruned = BigInt(fields[0] as string)
      this.#firstAt = fields[1] === null ? undefined : Number(fields[1])
    }
    const seq = fields[2]
    if (seq === null || seq === undefined) return
    const type = TYPE_OF_CODE[Number(fields[3])]
    if (type === undefined) throw new Error(`change ${seq} has an unknown type ${fields[3]}`)
    const id = fields[4] as string
    const name = fields[5] ?? null
    const parts = this.#parts
    let length = this.#length
    if (this.#lastSeq !== undefined) parts[length++] = ','
    parts[length++] = '{"seq":'
    parts[length++] = seq
    parts[length++] = ',"type":"'
    parts[length++] = type
    parts[length++] = '","id":'
    parts[length++] = id
    if (name !== null) {
      parts[length++] = ',"plant":'
      length = writePlantParts(parts, length, id, name, fields[6] ?? null)
    }
    parts[length++] = ',"at":"'
    parts[length++] = isoTime(Number(fields[7]))
    parts[length++] = '"}'
    this.#length = length
    this.#lastSeq = seq
  }

  /** The page once the query has completed; expired when `after` is below the pruned mark or its next change before `keptSince`. */
  page (after: bigint, keptSince: number): ChangeFeedJsonPage {
    if (after < this.#pruned || (this.#firstAt !== undefined && this.#firstAt < keptSince)) return { status: 'expired' }
    const parts = this.#parts
    parts[this.#length] = ']'
    parts.length = this.#length + 1
    return { status: 'page', json: parts.join(''), lastSeq: this.#lastSeq === undefined ? undefined : BigInt(this.#lastSeq) }
  }
}
