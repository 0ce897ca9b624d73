import pg from 'pg'
import { plantJson } from '../plant-document.js'
import { isNameOrder, pageOf, type PageRequest, type PlantPage } from '../plant-store.js'

/** A DataRow message as the protocol parser hands it over: each field's text, NULL as null. */
interface DataRow { readonly fields: ReadonlyArray<string | null> }

/**
 * A SELECT of `id, name, tag` (in that order) whose rows become documents as they arrive: the driver's
 * Result, its row arrays and their type parsers are skipped. The fields are the protocol's text, so the
 * id stays the exact decimal it is.
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
 * A page of plants (PlantPage) built as its rows arrive: each row's document, joined once at the end. The
 * statement reads `limit + 1` rows to learn whether more follow.
 */
export class PlantPageQuery extends PlantRowsQuery {
  readonly #documents: string[] = []
  readonly #ids: string[] = []
  /** The plants' names, in a name order (where the next page starts). */
  readonly #names: string[] | undefined
  readonly #request: PageRequest

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
    this.#names = isNameOrder(request) ? [] : undefined
  }

  protected addPlant (id: string, name: string, tag: string | null): void {
    this.#ids.push(id)
    this.#names?.push(name)
    this.#documents.push(plantJson(id, name, tag))
  }

  /** The page, once the query has completed. */
  page (): PlantPage {
    const names = this.#names
    return pageOf(this.#documents, this.#request, (index) => BigInt(this.#ids[index] as string),
      names === undefined ? undefined : (index) => names[index] as string)
  }
}

/** Plants by id: each plant's JSON document by its id. */
export class PlantDocumentsQuery extends PlantRowsQuery {
  readonly documents = new Map<bigint, string>()

  protected addPlant (id: string, name: string, tag: string | null): void {
    this.documents.set(BigInt(id), plantJson(id, name, tag))
  }
}
