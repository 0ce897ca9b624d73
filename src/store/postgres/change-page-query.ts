import { changeJsonOfFields, type ChangeFeedJsonPage } from '../change-document.js'
import { TYPE_OF_CODE } from '../change-log.js'
import { TextRowsQuery } from './text-rows-query.js'

/**
 * A page of the feed as the route answers it, built as its rows arrive from a statement selecting
 * `pruned, first_at, seq, type, plant_id, name, tag, committed_at` (changes.ts): the first two tell
 * whether the resume point is expired and stand on every row; a page without changes is one row whose
 * change fields are null.
 */
export class ChangePageQuery extends TextRowsQuery {
  readonly #documents: string[] = []
  #pruned = 0n
  #firstAt: number | undefined
  #lastSeq: string | undefined

  protected addRow (fields: ReadonlyArray<string | null>): void {
    if (this.#lastSeq === undefined && this.#documents.length === 0) {
      this.#pruned = BigInt(fields[0] as string)
      this.#firstAt = fields[1] === null ? undefined : Number(fields[1])
    }
    const seq = fields[2]
    if (seq === null || seq === undefined) return
    const type = TYPE_OF_CODE[Number(fields[3])]
    if (type === undefined) throw new Error(`change ${seq} has an unknown type ${fields[3]}`)
    this.#documents.push(changeJsonOfFields(seq, type, fields[4] as string, fields[5] ?? null, fields[6] ?? null, Number(fields[7])))
    this.#lastSeq = seq
  }

  /** The page once the query has completed; expired when `after` is below the pruned mark or its next change before `keptSince`. */
  page (after: bigint, keptSince: number): ChangeFeedJsonPage {
    if (after < this.#pruned || (this.#firstAt !== undefined && this.#firstAt < keptSince)) return { status: 'expired' }
    return { status: 'page', json: `[${this.#documents.join(',')}]`, lastSeq: this.#lastSeq === undefined ? undefined : BigInt(this.#lastSeq) }
  }
}
