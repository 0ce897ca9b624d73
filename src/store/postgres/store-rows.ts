import pg from 'pg'
import { openPostgresConnection } from './connection.js'
import { postgresMigrations } from './migrations.js'
import { announceTokenChange } from './token-changes.js'
import { latestVersion, SchemaTooNewError } from '../migration.js'
import { StoreUnavailableError } from '../plant-store.js'
import {
  assertCopiableSchema, MARKER_COLUMNS, markerOfRow, markerValues, NAMED_TOKENS, type CopyTarget, type MarkerRow, type StoreSnapshot,
  type TargetBatch, type TargetState
} from '../store-copy.js'
import type { Cell, ColumnType, StoreRow, StoreTable } from '../store-rows.js'

export interface PostgresCopyOptions {
  readonly connectTimeoutMs: number
  /** How long one statement may take before the copy gives up on the server. */
  readonly queryTimeoutMs: number
}

const KNOWN_VERSION = latestVersion(postgresMigrations)
const INT8_OID = 20
/** SQLSTATE classes that mean "not now": connection exceptions, insufficient resources, operator intervention. */
const TRANSIENT_SQLSTATE = /^(08|53|57)/
const ARRAY_TYPES: Record<ColumnType, string> = { int64: 'bigint[]', int32: 'int[]', text: 'text[]', bytes: 'bytea[]', time: 'bigint[]' }
const SCALAR_TYPES: Record<ColumnType, string> = { int64: 'bigint', int32: 'int', text: 'text', bytes: 'bytea', time: 'bigint' }

/**
 * A PostgreSQL store read inside one REPEATABLE READ READ ONLY transaction, on a connection of its own:
 * every page sees the store as it was at the first read, and the source is never changed.
 */
export async function openPostgresSnapshot (url: string, options: PostgresCopyOptions): Promise<StoreSnapshot> {
  const client = await connectedClient(url, options)
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    const tables = await existingTables(client)
    assertCopiableSchema(tables.has('plantstore_migrations') ? await storedSchemaVersion(client) : 0, KNOWN_VERSION)
  } catch (error) {
    await client.end().catch(() => {})
    throw asUnavailable(error)
  }
  return {
    async page (table, after, limit) {
      const { rows } = await query<unknown[]>(client, after === undefined
        ? { text: `SELECT ${selectList(table)} FROM ${table.name} ORDER BY id LIMIT $1`, values: [limit], rowMode: 'array' }
        : { text: `SELECT ${selectList(table)} FROM ${table.name} WHERE id > $1 ORDER BY id LIMIT $2`, values: [encodeCell(after), limit], rowMode: 'array' })
      return rows.map((row) => decodeRow(table, row))
    },
    async count (table) {
      const { rows } = await query<{ count: bigint }>(client, { text: `SELECT count(*) AS count FROM ${table.name}` })
      return Number(rows[0]?.count ?? 0)
    },
    async close () {
      await client.end().catch(() => {})
    }
  }
}

/**
 * A PostgreSQL store to copy into: each batch is one transaction of multi-row inserts from arrays
 * (`INSERT … SELECT FROM unnest(…)`). Instances may run on it meanwhile; the token revision tells them
 * to read the copied tokens.
 */
export function postgresCopyTarget (url: string, options: PostgresCopyOptions): CopyTarget {
  let pool: pg.Pool | undefined
  let client: pg.PoolClient | undefined
  const batch = (client: pg.PoolClient): TargetBatch => ({
    async insert (table, rows) {
      const { rowCount } = await query(client, {
        text: `INSERT INTO ${table.name} (${columnList(table.columns)}) ${fromArrays(table, table.columns)} ON CONFLICT DO NOTHING`,
        values: arraysOf(table, rows, 0)
      })
      if (table.naturalKey !== undefined && rows.length > 0) {
        // Ids given explicitly leave the sequence behind: the target's own next rows must come after them.
        const highest = rows.reduce((high, row) => (row[0] as bigint) > high ? row[0] as bigint : high, 0n)
        await query(client, {
          text: 'SELECT setval(pg_get_serial_sequence($1, \'id\'), GREATEST(nextval(pg_get_serial_sequence($1, \'id\')), $2::bigint))',
          values: [table.name, highest.toString()]
        })
      }
      return rowCount ?? 0
    },
    async insertWithNewIds (table, rows) {
      const columns = table.columns.slice(1)
      await query(client, { text: `INSERT INTO ${table.name} (${columnList(columns)}) ${fromArrays(table, columns)}`, values: arraysOf(table, rows, 1) })
    },
    async stored (table, keys) {
      const keyType = table.columns[0]?.type ?? 'text'
      const { rows } = await query<unknown[]>(client, {
        text: `SELECT ${selectList(table)} FROM ${table.name} WHERE id = ANY($1::${ARRAY_TYPES[keyType]})`, values: [keys.map(encodeCell)], rowMode: 'array'
      })
      return rows.map((row) => decodeRow(table, row))
    },
    async storedAlike (table, row) {
      const naturalKey = (table.naturalKey ?? []).map((name) => table.columns.findIndex((column) => column.name === name))
      const { rows } = await query<unknown[]>(client, {
        text: `SELECT ${selectList(table)} FROM ${table.name} WHERE ` +
          naturalKey.map((index, n) => `${table.columns[index]?.name} = $${n + 1}::${SCALAR_TYPES[table.columns[index]?.type ?? 'text']}`).join(' AND ') + ' LIMIT 1',
        values: naturalKey.map((index) => encodeCell(row[index] ?? null)),
        rowMode: 'array'
      })
      return rows[0] === undefined ? undefined : decodeRow(table, rows[0])
    },
    async liveTokens (nowMicros) {
      const { rows } = await query<[string, string]>(client, {
        text: `SELECT name, id FROM access_tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${timeOfMicros('$1::bigint')})`,
        values: [nowMicros.toString()],
        rowMode: 'array'
      })
      return new Map(rows)
    },
    async saveMarker (marker) {
      await query(client, {
        text: `INSERT INTO store_copy (singleton, ${MARKER_COLUMNS}) VALUES (1, $1, $2, $3, $4, $5, $6)
               ON CONFLICT (singleton) DO UPDATE SET source = excluded.source, started_at = excluded.started_at, finished_at = excluded.finished_at,
                 copying = excluded.copying, after_key = excluded.after_key, tally = excluded.tally`,
        values: markerValues(marker)
      })
    },
    async announceTokenChange () {
      await announceTokenChange(client)
    }
  })

  return {
    async inspect () {
      const inspector = await connectedClient(url, options)
      try {
        return await inspectPostgresStore(inspector)
      } catch (error) {
        throw asUnavailable(error)
      } finally {
        await inspector.end().catch(() => {})
      }
    },
    async prepare () {
      const connection = await openPostgresConnection(url, { poolSize: 1, connectTimeoutMs: options.connectTimeoutMs, statementTimeoutMs: options.queryTimeoutMs })
      try {
        await connection.ping()
      } finally {
        await connection.close()
      }
      // A pool of one, for its client: the token changes are announced through a pooled client.
      pool = new pg.Pool({ ...clientConfig(url, options), max: 1 })
      pool.on('error', ignoreError)
      client = await pool.connect().catch((error: unknown) => { throw asUnavailable(error) })
      client.on('error', ignoreError)
    },
    async batch (work) {
      if (client === undefined) throw new Error('the target is not prepared')
      await query(client, { text: 'BEGIN' })
      try {
        const result = await work(batch(client))
        await query(client, { text: 'COMMIT' })
        return result
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {})
        throw error
      }
    },
    asStored: (_table, row) => row,
    async close () {
      client?.release()
      await pool?.end().catch(() => {})
    }
  }
}

/** What the database holds, whatever its schema version, without changing anything. */
async function inspectPostgresStore (client: pg.Client): Promise<TargetState> {
  const tables = await existingTables(client)
  const schemaVersion = tables.has('plantstore_migrations') ? await storedSchemaVersion(client) : 0
  if (schemaVersion > KNOWN_VERSION) throw new SchemaTooNewError(schemaVersion, KNOWN_VERSION)
  const count = async (table: string) => {
    if (!tables.has(table)) return 0
    const { rows } = await client.query<{ count: bigint }>(`SELECT count(*) AS count FROM ${table}`)
    return Number(rows[0]?.count ?? 0)
  }
  // Release 1.0.0 kept its generated token apart; the next start makes it `initial-admin`.
  const tokenNames = tables.has('access_tokens')
    ? (await client.query<{ name: string }>(`SELECT name FROM access_tokens ORDER BY created_at, id LIMIT ${NAMED_TOKENS}`)).rows.map((row) => row.name)
    : Array(await count('generated_access_token')).fill('initial-admin') as string[]
  const marker = tables.has('store_copy') ? (await client.query<MarkerRow>(`SELECT ${MARKER_COLUMNS} FROM store_copy`)).rows[0] : undefined
  return {
    schemaVersion,
    ...(marker === undefined ? {} : { marker: markerOfRow(marker) }),
    plants: await count('plants'),
    tokens: await count('access_tokens') + await count('generated_access_token'),
    tokenNames,
    subscriptions: await count('webhook_subscriptions')
  }
}

/** A connection the server drops reports itself through the pending query; without a listener it would crash the process. */
const ignoreError = () => {}

function clientConfig (url: string, options: PostgresCopyOptions): pg.ClientConfig {
  return {
    connectionString: url,
    connectionTimeoutMillis: options.connectTimeoutMs,
    query_timeout: options.queryTimeoutMs,
    application_name: 'plantstore-copy',
    keepAlive: true,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID && format !== 'binary'
          ? (text: string) => BigInt(text)
          : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser
    }
  }
}

async function connectedClient (url: string, options: PostgresCopyOptions): Promise<pg.Client> {
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

async function existingTables (client: pg.Client): Promise<Set<string>> {
  const { rows } = await client.query<{ name: string }>(
    'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()')
  return new Set(rows.map((row) => row.name))
}

async function storedSchemaVersion (client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM plantstore_migrations')
  return rows[0]?.version ?? 0
}

async function query<Row extends pg.QueryResultRow> (client: pg.ClientBase, config: pg.QueryConfig & { rowMode?: 'array' }): Promise<pg.QueryResult<Row>> {
  try {
    return await client.query<Row>(config as pg.QueryConfig)
  } catch (error) {
    throw asUnavailable(error)
  }
}

/** Refused, reset, timed out, shut down: a StoreUnavailableError, whose message says so. Others as they are. */
function asUnavailable (error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof StoreUnavailableError || error instanceof SchemaTooNewError) return error
  const code = (error as { code?: unknown }).code
  const isSqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)
  if (isSqlState && !TRANSIENT_SQLSTATE.test(code)) return error
  return new StoreUnavailableError(`PostgreSQL is unavailable (${error.message === '' ? String(code) : error.message})`, { cause: error })
}

function columnList (columns: StoreTable['columns']): string {
  return columns.map((column) => column.name).join(', ')
}

/** Times leave PostgreSQL as microseconds since the epoch, exactly. */
function selectList (table: StoreTable): string {
  return table.columns.map((column) => column.type === 'time' ? `(extract(epoch FROM ${column.name}) * 1000000)::bigint` : column.name).join(', ')
}

function timeOfMicros (micros: string): string {
  return `(timestamptz 'epoch' + ${micros} * interval '1 microsecond')`
}

/** `SELECT … FROM unnest($1::bigint[], …)`: one array parameter per column. */
function fromArrays (table: StoreTable, columns: StoreTable['columns']): string {
  const arrays = columns.map((column, index) => `$${index + 1}::${ARRAY_TYPES[column.type]}`)
  const names = columns.map((_, index) => `c${index}`)
  const values = columns.map((column, index) => column.type === 'time' ? timeOfMicros(`u.c${index}`) : `u.c${index}`)
  return `SELECT ${values.join(', ')} FROM unnest(${arrays.join(', ')}) AS u (${names.join(', ')})`
}

function arraysOf (table: StoreTable, rows: readonly StoreRow[], firstColumn: number): unknown[][] {
  return table.columns.slice(firstColumn).map((_, offset) => rows.map((row) => encodeCell(row[firstColumn + offset] ?? null)))
}

/** int64 and time cells cross as decimal text: node-postgres has no `bigint` parameters of its own. */
function encodeCell (cell: Cell): unknown {
  return typeof cell === 'bigint' ? cell.toString() : cell
}

function decodeRow (table: StoreTable, row: readonly unknown[]): StoreRow {
  return table.columns.map((column, index): Cell => {
    const value = row[index]
    if (value === null || value === undefined) return null
    return column.type === 'int32' ? Number(value) : value as Cell
  })
}
