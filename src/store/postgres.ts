import pg from 'pg'
import { latestVersion, SchemaTooNewError } from './migrations/migration.js'
import { postgresMigrations } from './migrations/postgres.js'
import { samePlant, StoreUnavailableError, type CreateOutcome, type PlantRecord, type PlantStore } from './plant-store.js'

export interface PostgresOptions {
  /** Connections this instance may hold; instances × poolSize must stay below max_connections. */
  readonly poolSize: number
  /** How long to wait for a connection (new or from the pool) before the request gets a 503. */
  readonly connectTimeoutMs: number
  /** Server-side statement_timeout; the client gives up a second later if the server is silent. */
  readonly statementTimeoutMs: number
}

interface PlantRow { id: bigint, name: string, tag: string | null }

const INT8_OID = 20
/** Serializes schema changes of concurrently starting instances (an arbitrary, fixed key). */
const MIGRATION_LOCK_KEY = '7243190561180520497'

const MIGRATIONS_TABLE = `
  CREATE TABLE IF NOT EXISTS plantstore_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
  )`

const INSERT_PLANT = {
  name: 'plantstore-insert-plant',
  text: 'INSERT INTO plants (id, name, tag) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING'
}
const SELECT_PLANT = { name: 'plantstore-select-plant', text: 'SELECT id, name, tag FROM plants WHERE id = $1' }
const LIST_FIRST = { name: 'plantstore-list-first', text: 'SELECT id, name, tag FROM plants ORDER BY id LIMIT $1' }
const LIST_AFTER = { name: 'plantstore-list-after', text: 'SELECT id, name, tag FROM plants WHERE id > $1 ORDER BY id LIMIT $2' }
const DELETE_PLANT = { name: 'plantstore-delete-plant', text: 'DELETE FROM plants WHERE id = $1' }

/**
 * PostgreSQL through a node-postgres pool. Each create is one autocommit statement, so a `created`
 * outcome means COMMIT returned (with the server's default synchronous_commit, the WAL is flushed).
 * BIGINT columns are parsed to `bigint`, never through a double.
 *
 * The store opens even while the database is down: the schema is brought up to date by the first
 * operation that reaches the database, and every operation until then is a StoreUnavailableError.
 */
export async function openPostgresStore (connectionString: string, options: PostgresOptions): Promise<PlantStore> {
  const pool = new pg.Pool({
    connectionString,
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: options.statementTimeoutMs,
    query_timeout: options.statementTimeoutMs + 1000,
    application_name: 'plantstore',
    keepAlive: true,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID && format !== 'binary'
          ? (text: string) => BigInt(text)
          : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser
    }
  })
  // An idle connection that the server drops emits here; the pool replaces it, and the next query
  // that cannot get a connection reports the outage to its own request.
  pool.on('error', () => {})

  let schemaReady: Promise<void> | undefined
  const ensureSchema = (): Promise<void> => {
    schemaReady ??= migrate(pool).catch((error: unknown) => {
      const failure = asStoreError(error)
      if (failure instanceof StoreUnavailableError) schemaReady = undefined
      throw failure
    })
    return schemaReady
  }

  async function query<Row extends pg.QueryResultRow> (config: pg.QueryConfig): Promise<pg.QueryResult<Row>> {
    await ensureSchema()
    try {
      return await pool.query<Row>(config)
    } catch (error) {
      throw asStoreError(error)
    }
  }

  try {
    await ensureSchema()
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) {
      await pool.end()
      throw error
    }
  }

  return {
    backend: 'postgres',
    async create (plant): Promise<CreateOutcome> {
      const values = [plant.id.toString(), plant.name, plant.tag ?? null]
      for (;;) {
        const inserted = await query({ ...INSERT_PLANT, values })
        if (inserted.rowCount === 1) return { status: 'created', plant }
        const found = await query<PlantRow>({ ...SELECT_PLANT, values: [values[0]] })
        const row = found.rows[0]
        // No row: the conflicting plant was deleted between the two statements, so insert again.
        if (row === undefined) continue
        const existing = toRecord(row)
        return samePlant(existing, plant)
          ? { status: 'replayed', plant: existing }
          : { status: 'conflict', existing }
      }
    },
    async get (id) {
      const { rows } = await query<PlantRow>({ ...SELECT_PLANT, values: [id.toString()] })
      return rows[0] === undefined ? undefined : toRecord(rows[0])
    },
    async list ({ after, limit }) {
      const { rows } = await query<PlantRow>(after === undefined
        ? { ...LIST_FIRST, values: [limit] }
        : { ...LIST_AFTER, values: [after.toString(), limit] })
      return rows.map(toRecord)
    },
    async delete (id) {
      const { rowCount } = await query({ ...DELETE_PLANT, values: [id.toString()] })
      return rowCount === 1
    },
    async ensureGeneratedTokenDigest (digest) {
      await query({
        text: 'INSERT INTO generated_access_token (singleton, sha256) VALUES (1, $1) ON CONFLICT (singleton) DO NOTHING',
        values: [digest]
      })
      const result = await query<{ sha256: Buffer }>({ text: 'SELECT sha256 FROM generated_access_token WHERE singleton = 1' })
      const stored = result.rows[0]?.sha256
      if (stored === undefined) throw new Error('the generated token digest vanished after it was stored')
      return stored
    },
    async ping () {
      try {
        await query({ text: 'SELECT 1' })
      } catch (error) {
        throw error instanceof StoreUnavailableError
          ? error
          : new StoreUnavailableError(`PostgreSQL cannot be queried (${(error as Error).message})`, { cause: error })
      }
    },
    async close () {
      await pool.end()
    }
  }
}

function toRecord (row: PlantRow): PlantRecord {
  return row.tag === null ? { id: row.id, name: row.name } : { id: row.id, name: row.name, tag: row.tag }
}

/** SQLSTATE classes that mean "not now": connection exceptions, insufficient resources, operator intervention. */
const TRANSIENT_SQLSTATE = /^(08|53|57)/

function asStoreError (error: unknown): unknown {
  if (error instanceof SchemaTooNewError || error instanceof StoreUnavailableError) return error
  if (error instanceof TypeError || error instanceof RangeError) return error
  const code = (error as { code?: unknown }).code
  const isSqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)
  // Without a SQLSTATE the error is the connection's own: refused, reset, timed out, terminated.
  if (!isSqlState || TRANSIENT_SQLSTATE.test(code)) {
    return new StoreUnavailableError(`PostgreSQL is unavailable (${isSqlState ? code : (error as Error).message})`, { cause: error })
  }
  return error
}

async function migrate (pool: pg.Pool): Promise<void> {
  const known = latestVersion(postgresMigrations)
  const client = await pool.connect()
  let failure: unknown
  try {
    await client.query('BEGIN')
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY])
    await client.query(MIGRATIONS_TABLE)
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM plantstore_migrations')
    const current = rows[0]?.version ?? 0
    if (current > known) throw new SchemaTooNewError(current, known)
    for (const migration of postgresMigrations) {
      if (migration.version <= current) continue
      await client.query(migration.sql)
      await client.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
    }
    await client.query('COMMIT')
  } catch (error) {
    failure = error
    await client.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    // A client whose transaction failed may hold a broken connection: destroy it rather than reuse it.
    client.release(failure !== undefined)
  }
}
