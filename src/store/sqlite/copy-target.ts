import { existsSync } from 'node:fs'
import { openSqliteDatabase } from './connection.js'
import Database, { type SqliteDatabase } from './driver.js'
import { BUSY_TIMEOUT_MS, columnList, decodeRow, encodeRow, KNOWN_VERSION, StatementCache, timeText } from './store-rows.js'
import { keyColumn, writtenRow, writtenTable } from '../store-rows.js'
import { SchemaTooNewError } from '../migration.js'
import { MARKER_COLUMNS, markerOfRow, markerValues, NAMED_TOKENS, type CopyTarget, type MarkerRow, type TargetBatch, type TargetState } from '../store-copy.js'

/**
 * A SQLite store to copy into, written on a connection of its own in large transactions. No service may
 * use the file meanwhile: the copy holds the write lock for each batch.
 */
export function sqliteCopyTarget (file: string): CopyTarget {
  let db: SqliteDatabase | undefined
  let batch: TargetBatch | undefined
  return {
    async inspect () {
      return existsSync(file) ? inspectSqliteStore(file) : { schemaVersion: 0, plants: 0, tokens: 0, tokenNames: [], subscriptions: 0, changeLogHead: 0n }
    },
    async prepare () {
      db = openSqliteDatabase(file, { busyTimeoutMs: BUSY_TIMEOUT_MS })
      batch = sqliteBatch(new StatementCache(db))
    },
    async batch (work) {
      if (db === undefined || batch === undefined) throw new Error('the target is not prepared')
      db.exec('BEGIN IMMEDIATE')
      try {
        const result = await work(batch)
        db.exec('COMMIT')
        return result
      } catch (error) {
        if (db.inTransaction) db.exec('ROLLBACK')
        throw error
      }
    },
    asStored: (table, row) => decodeRow(table, encodeRow(table, row)),
    async close () {
      if (db?.open === true) db.close()
    }
  }
}

/** The writes of a batch, on the target's connection, inside the transaction `batch` opened. */
function sqliteBatch (statements: StatementCache): TargetBatch {
  return {
    async insert (table, rows) {
      const written = writtenTable(table)
      const names = written.columns.map((column) => column.name)
      const insert = statements.get(`${table.name} insert`,
        `INSERT INTO ${table.name} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')}) ON CONFLICT DO NOTHING`)
      let inserted = 0
      for (const row of rows) inserted += insert.run(...encodeRow(written, writtenRow(table, row))).changes
      return inserted
    },
    async insertWithNewIds (table, rows) {
      const names = table.columns.slice(1).map((column) => column.name)
      const insert = statements.get(`${table.name} insert new id`,
        `INSERT INTO ${table.name} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`)
      for (const row of rows) insert.run(...encodeRow(table, row).slice(1))
    },
    async stored (table, keys) {
      const select = statements.get(`${table.name} by key`, `SELECT ${columnList(table)} FROM ${table.name} WHERE ${keyColumn(table)} = ?`)
      return keys.flatMap((key) => (select.all(key) as unknown[][]).map((row) => decodeRow(table, row)))
    },
    async storedAlike (table, row) {
      const naturalKey = table.naturalKey ?? []
      const select = statements.get(`${table.name} alike`,
        `SELECT ${columnList(table)} FROM ${table.name} WHERE ${naturalKey.map((name) => `${name} = ?`).join(' AND ')} LIMIT 1`)
      const encoded = encodeRow(table, row)
      const found = select.get(...naturalKey.map((name) => encoded[table.columns.findIndex((column) => column.name === name)])) as unknown[] | undefined
      return found === undefined ? undefined : decodeRow(table, found)
    },
    async liveTokens (nowMicros) {
      const select = statements.get('live tokens',
        'SELECT name, id FROM access_tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)')
      return new Map(select.all(timeText(nowMicros)) as Array<[string, string]>)
    },
    async saveMarker (marker) {
      statements.get('save marker', `INSERT INTO store_copy (singleton, ${MARKER_COLUMNS}) VALUES (1, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (singleton) DO UPDATE SET source = excluded.source, started_at = excluded.started_at, finished_at = excluded.finished_at,
          copying = excluded.copying, after_key = excluded.after_key, tally = excluded.tally`).run(...markerValues(marker))
    },
    async announceTokenChange () {
      statements.get('advance revision', 'UPDATE access_token_revision SET revision = revision + 1 WHERE singleton = 1').run()
    },
    // The batch holds the database's write lock: no other connection numbers a change meanwhile.
    async changeLogHead () {
      const [head] = statements.get('change log head', 'SELECT head FROM change_log WHERE singleton = 1').get() as [bigint]
      return head
    },
    async continueChangeLog ({ head, prunedThrough }) {
      statements.get('continue change log', `UPDATE change_log SET head = max(head, ?), pruned_through = max(pruned_through, ?)
        WHERE singleton = 1`).run(head, prunedThrough)
      statements.get('remove pruned changes', 'DELETE FROM plant_changes WHERE seq <= (SELECT pruned_through FROM change_log WHERE singleton = 1)').run()
    }
  }
}

/** What the file holds, read on a read-only connection, whatever its schema version. */
function inspectSqliteStore (file: string): TargetState {
  const db = new Database(file, { readonly: true, fileMustExist: true })
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
    db.defaultSafeIntegers(true)
    const schemaVersion = Number(db.pragma('user_version', { simple: true }))
    const tables = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[])
    if (schemaVersion > KNOWN_VERSION) throw new SchemaTooNewError(schemaVersion, KNOWN_VERSION)
    if (schemaVersion === 0 && tables.size > 0) throw new Error('it is a SQLite database of something else: it has tables but no plantstore schema version')
    const count = (table: string) => tables.has(table) ? Number(db.prepare(`SELECT count(*) FROM ${table}`).pluck().get()) : 0
    // Release 1.0.0 kept its generated token apart; the next start makes it `initial-admin`.
    const tokenNames = tables.has('access_tokens')
      ? db.prepare(`SELECT name FROM access_tokens ORDER BY created_at, id LIMIT ${NAMED_TOKENS}`).pluck().all() as string[]
      : Array(count('generated_access_token')).fill('initial-admin') as string[]
    const marker = tables.has('store_copy') ? db.prepare(`SELECT ${MARKER_COLUMNS} FROM store_copy`).get() as MarkerRow | undefined : undefined
    const changeLogHead = tables.has('change_log') ? db.prepare('SELECT head FROM change_log WHERE singleton = 1').pluck().get() as bigint : 0n
    return {
      schemaVersion,
      ...(marker === undefined ? {} : { marker: markerOfRow(marker) }),
      plants: count('plants'),
      tokens: count('access_tokens') + count('generated_access_token'),
      tokenNames,
      subscriptions: count('webhook_subscriptions'),
      changeLogHead
    }
  } finally {
    db.close()
  }
}
