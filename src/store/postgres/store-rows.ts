import pg from 'pg'
import { postgresMigrations } from './migrations.js'
import { BIGINT_AS_BIGINT } from './connection.js'
import { latestVersion, SchemaTooNewError } from '../migration.js'
import { StoreUnavailableError } from '../plant-store.js'
import { assertCopiableSchema, type CopyConnectionOptions, type StoreSnapshot } from '../store-copy.js'
import { isInSchema, keyColumn, selectedColumn, storeTable, type Cell, type ColumnType, type StoreRow, type StoreTable } from '../store-rows.js'

/** The newest schema this release knows. */
export const KNOWN_VERSION = latestVersion(postgresMigrations)
/** SQLSTATE classes that mean "not now": connection exceptions, insufficient resources, operator intervention. */
const TRANSIENT_SQLSTATE = /^(08|53|57)/
/** Each column type's parameter type (arrays for `unnest`, scalars for one value): times cross as microseconds. */
export const ARRAY_TYPES: Record<ColumnType, string> = { int64: 'bigint[]', int32: 'int[]', text: 'text[]', bytes: 'bytea[]', time: 'bigint[]' }
export const SCALAR_TYPES: Record<ColumnType, string> = { int64: 'bigint', int32: 'int', text: 'text', bytes: 'bytea', time: 'bigint' }

/**
 * A PostgreSQL store read inside one REPEATABLE READ READ ONLY transaction, on a connection of its own:
 * every page sees the store as it was at the first read, and the source is never changed.
 */
export async function openPostgresSnapshot (url: string, options: CopyConnectionOptions): Promise<StoreSnapshot> {
  const client = await connectedClient(url, options)
  let schemaVersion = 0
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    const tables = await existingTables(client)
    schemaVersion = tables.has('plantstore_migrations') ? await storedSchemaVersion(client) : 0
    assertCopiableSchema(schemaVersion, KNOWN_VERSION)
  } catch (error) {
    await client.end().catch(() => {})
    throw asUnavailable(error)
  }
  return {
    async page (table, after, limit) {
      if (!isInSchema(table, schemaVersion)) return []
      const [columns, key] = [selectList(table, schemaVersion), keyColumn(table)]
      const { rows } = await query<unknown[]>(client, after === undefined
        ? { text: `SELECT ${columns} FROM ${table.name} ORDER BY ${key} LIMIT $1`, values: [limit], rowMode: 'array' }
        : { text: `SELECT ${columns} FROM ${table.name} WHERE ${key} > $1 ORDER BY ${key} LIMIT $2`, values: [encodeCell(after), limit], rowMode: 'array' })
      return rows.map((row) => decodeRow(table, row))
    },
    async count (table) {
      if (!isInSchema(table, schemaVersion)) return 0
      const { rows } = await query<{ count: bigint }>(client, { text: `SELECT count(*) AS count FROM ${table.name}` })
      return Number(rows[0]?.count ?? 0)
    },
    async changeLogBounds () {
      if (!isInSchema(storeTable('plant_changes'), schemaVersion)) return { head: 0n, prunedThrough: 0n }
      const { rows } = await query<{ head: bigint, through: bigint }>(client, {
        text: 'SELECT (SELECT head FROM change_log_head WHERE singleton = 1) AS head, (SELECT through FROM change_log_pruned WHERE singleton = 1) AS through'
      })
      const bounds = rows[0] as { head: bigint, through: bigint }
      return { head: bounds.head, prunedThrough: bounds.through }
    },
    async close () {
      await client.end().catch(() => {})
    }
  }
}

/** A connection the server drops reports itself through the pending query; without a listener it would crash the process. */
export const ignoreError = () => {}

/** A connection of the copy's own: BIGINT parsed to `bigint`, never through a double. */
export function clientConfig (url: string, options: CopyConnectionOptions): pg.ClientConfig {
  return {
    connectionString: url,
    connectionTimeoutMillis: options.connectTimeoutMs,
    query_timeout: options.queryTimeoutMs,
    application_name: 'plantstore-copy',
    keepAlive: true,
    types: BIGINT_AS_BIGINT
  }
}

/** A connected client; an outage is a StoreUnavailableError. */
export async function connectedClient (url: string, options: CopyConnectionOptions): Promise<pg.Client> {
  const client = new pg.Client(clientConfig(url, options))
  client.on('error', ignoreError)
  try {
    await client.connect()
  } catch (error) {
    await client.end().catch(() => {})
    throw asUnavailable(error)
  }
  return client
}

/** The tables of the current schema, whatever the store's schema version. */
export async function existingTables (client: pg.Client): Promise<Set<string>> {
  const { rows } = await client.query<{ name: string }>(
    'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()')
  return new Set(rows.map((row) => row.name))
}

/** The newest migration applied, from `plantstore_migrations`, which must exist. */
export async function storedSchemaVersion (client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM plantstore_migrations')
  return rows[0]?.version ?? 0
}

/** One statement; an outage is a StoreUnavailableError. */
export async function query<Row extends pg.QueryResultRow> (client: pg.ClientBase, config: pg.QueryConfig & { rowMode?: 'array' }): Promise<pg.QueryResult<Row>> {
  try {
    return await client.query<Row>(config as pg.QueryConfig)
  } catch (error) {
    throw asUnavailable(error)
  }
}

/** Refused, reset, timed out, shut down: a StoreUnavailableError, whose message says so. Others as they are. */
export function asUnavailable (error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof StoreUnavailableError || error instanceof SchemaTooNewError) return error
  const code = (error as { code?: unknown }).code
  const isSqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)
  if (isSqlState && !TRANSIENT_SQLSTATE.test(code)) return error
  return new StoreUnavailableError(`PostgreSQL is unavailable (${error.message === '' ? String(code) : error.message})`, { cause: error })
}

/** The columns' names, for an INSERT. */
export function columnList (columns: StoreTable['columns']): string {
  return columns.map((column) => column.name).join(', ')
}

/**
 * The columns' names for a SELECT; times leave PostgreSQL as microseconds since the epoch, exactly. A
 * store of an older schema (`schemaVersion`) is read with NULL for the columns it lacks.
 */
export function selectList (table: StoreTable, schemaVersion = KNOWN_VERSION): string {
  return table.columns.map((column) => selectedColumn(column, schemaVersion,
    column.type === 'time' ? `(extract(epoch FROM ${column.name}) * 1000000)::bigint` : column.name)).join(', ')
}

/** SQL of the TIMESTAMPTZ `micros` microseconds after the epoch, exactly. */
export function timeOfMicros (micros: string): string {
  return `(timestamptz 'epoch' + ${micros} * interval '1 microsecond')`
}

/** `SELECT … FROM unnest($1::bigint[], …)`: one array parameter per column. */
export function fromArrays (columns: StoreTable['columns']): string {
  const arrays = columns.map((column, index) => `$${index + 1}::${ARRAY_TYPES[column.type]}`)
  const names = columns.map((_, index) => `c${index}`)
  const values = columns.map((column, index) => column.type === 'time' ? timeOfMicros(`u.c${index}`) : `u.c${index}`)
  return `SELECT ${values.join(', ')} FROM unnest(${arrays.join(', ')}) AS u (${names.join(', ')})`
}

/** The rows' cells as one array parameter per column, from `firstColumn` on. */
export function arraysOf (table: StoreTable, rows: readonly StoreRow[], firstColumn: number): unknown[][] {
  return table.columns.slice(firstColumn).map((_, offset) => rows.map((row) => encodeCell(row[firstColumn + offset] ?? null)))
}

/** int64 and time cells cross as decimal text: node-postgres has no `bigint` parameters of its own. */
export function encodeCell (cell: Cell): unknown {
  return typeof cell === 'bigint' ? cell.toString() : cell
}

/** A row as node-postgres returns it in array mode, as every backend's rows are. */
export function decodeRow (table: StoreTable, row: readonly unknown[]): StoreRow {
  return table.columns.map((column, index): Cell => {
    const value = row[index]
    if (value === null || value === undefined) return null
    return column.type === 'int32' ? Number(value) : value as Cell
  })
}
