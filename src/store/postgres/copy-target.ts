import pg from 'pg'
import { openPostgresConnection } from './connection.js'
import {
  ARRAY_TYPES, arraysOf, asUnavailable, clientConfig, columnList, connectedClient, decodeRow, encodeCell, existingTables, fromArrays,
  ignoreError, KNOWN_VERSION, query, SCALAR_TYPES, selectList, storedSchemaVersion, timeOfMicros
} from './store-rows.js'
import { announceTokenChange } from './token-changes.js'
import { CHANGES_CHANNEL } from './write-batch.js'
import { SchemaTooNewError } from '../migration.js'
import { MARKER_COLUMNS, markerOfRow, markerValues, NAMED_TOKENS, type CopyConnectionOptions, type CopyTarget, type MarkerRow, type TargetBatch, type TargetState } from '../store-copy.js'
import { keyColumn, writtenRow, writtenTable } from '../store-rows.js'

/**
 * A PostgreSQL store to copy into: each batch is one transaction of multi-row inserts from arrays
 * (`INSERT … SELECT FROM unnest(…)`). Instances may run on it meanwhile; the token revision tells them
 * to read the copied tokens.
 */
export function postgresCopyTarget (url: string, options: CopyConnectionOptions): CopyTarget {
  let pool: pg.Pool | undefined
  let client: pg.PoolClient | undefined
  const batch = (client: pg.PoolClient): TargetBatch => ({
    async insert (table, rows) {
      const written = writtenTable(table)
      const { rowCount } = await query(client, {
        text: `INSERT INTO ${table.name} (${columnList(written.columns)}) ${fromArrays(written.columns)} ON CONFLICT DO NOTHING`,
        values: arraysOf(written, rows.map((row) => writtenRow(table, row)), 0)
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
      await query(client, { text: `INSERT INTO ${table.name} (${columnList(columns)}) ${fromArrays(columns)}`, values: arraysOf(table, rows, 1) })
    },
    async stored (table, keys) {
      const keyType = table.columns[0]?.type ?? 'text'
      const { rows } = await query<unknown[]>(client, {
        text: `SELECT ${selectList(table)} FROM ${table.name} WHERE ${keyColumn(table)} = ANY($1::${ARRAY_TYPES[keyType]})`,
        values: [keys.map(encodeCell)],
        rowMode: 'array'
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
    },
    async changeLogHead () {
      const { rows } = await query<{ head: bigint }>(client, { text: 'SELECT head FROM change_log_head WHERE singleton = 1 FOR UPDATE' })
      return (rows[0] as { head: bigint }).head
    },
    async continueChangeLog ({ head, prunedThrough }) {
      await query(client, {
        text: `WITH moved AS (UPDATE change_log_head SET head = greatest(head, $1::bigint) WHERE singleton = 1 RETURNING head)
               SELECT pg_notify('${CHANGES_CHANNEL}', head::text) FROM moved`,
        values: [head.toString()]
      })
      await query(client, {
        text: `WITH moved AS (UPDATE change_log_pruned SET through = greatest(through, $1::bigint) WHERE singleton = 1 RETURNING through)
               DELETE FROM plant_changes WHERE seq <= (SELECT through FROM moved)`,
        values: [prunedThrough.toString()]
      })
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
  const changeLogHead = tables.has('change_log_head')
    ? (await client.query<{ head: bigint }>('SELECT head FROM change_log_head WHERE singleton = 1')).rows[0]?.head ?? 0n
    : 0n
  return {
    schemaVersion,
    ...(marker === undefined ? {} : { marker: markerOfRow(marker) }),
    plants: await count('plants'),
    tokens: await count('access_tokens') + await count('generated_access_token'),
    tokenNames,
    subscriptions: await count('webhook_subscriptions'),
    changeLogHead
  }
}
