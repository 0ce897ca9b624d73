import pg from 'pg'
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
    super({ name: statement.name, text: statement.text, values })
  }

  /** Replaces the driver's row handling: no row object, no Result row. */
  handleDataRow (message: DataRow): void {
    const { fields } = message
    this.addPlant(fields[0] as string, fields[1] as string, fields[2] ?? null)
  }

  protected abstract addPlant (id: string, name: string, tag: string | null): void
}

/** A page of plants (PlantPage) built as its rows arrive; the statement reads `limit + 1` rows to learn whether more follow. */
export class PlantPageQuery extends PlantRowsQuery {
  #text = ''
  #rows = 0
  #lastId = ''
  readonly #limit: number
  readonly #lines: boolean

  constructor (statement: { readonly name: string, readonly text: string }, values: unknown[], request: PageRequest) {
    super(statement, values)
    this.#limit = request.limit
    this.#lines = request.lines === true
  }

  protected addPlant (id: string, name: string, tag: string | null): void {
    const row = this.#rows++
    if (row >= this.#limit) return
    this.#lastId = id
    const document = plantJson(id, name, tag)
    this.#text = this.#lines ? `${this.#text}${document}\n` : (row === 0 ? document : `${this.#text},${document}`)
  }

  /** The page, once the query has completed. */
  page (): PlantPage {
    const json = this.#lines ? this.#text : `[${this.#text}]`
    return this.#rows > this.#limit ? { json, nextAfter: BigInt(this.#lastId) } : { json }
  }
}

/** Plants by id: each plant's JSON document by its id. */
export class PlantDocumentsQuery extends PlantRowsQuery {
  readonly documents = new Map<bigint, string>()

  protected addPlant (id: string, name: string, tag: string | null): void {
    this.documents.set(BigInt(id), plantJson(id, name, tag))
  }
}
