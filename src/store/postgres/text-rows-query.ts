import pg from 'pg'

/** A DataRow message as the protocol parser hands it over: each field's text, NULL as null. */
interface DataRow { readonly fields: ReadonlyArray<string | null> }

/**
 * A prepared SELECT whose rows are handed over as the protocol's text as they arrive: the driver's Result,
 * its row objects and their type parsers are skipped, and ids stay the exact decimals they are.
 */
export abstract class TextRowsQuery extends pg.Query {
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
    this.addRow(message.fields)
  }

  protected abstract addRow (fields: ReadonlyArray<string | null>): void
}
