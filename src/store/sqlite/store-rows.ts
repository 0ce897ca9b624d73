import { existsSync } from 'node:fs'
import { openSqliteDatabase } from './connection.js'
import Database, { type SqliteDatabase, type Statement } from './driver.js'
import { sqliteMigrations } from './migrations.js'
import { latestVersion, SchemaTooNewError } from '../migration.js'
import {
  assertCopiableSchema, MARKER_COLUMNS, markerOfRow, markerValues, NAMED_TOKENS, type CopyTarget, type MarkerRow, type StoreSnapshot,
  type TargetBatch, type TargetState
} from '../store-copy.js'
import type { Cell, StoreRow, StoreTable } from '../store-rows.js'

/** A copy waits this long for another connection's lock (a backup, a checkpoint) before it gives up. */
const BUSY_TIMEOUT_MS = 5000
const KNOWN_VERSION = latestVersion(sqliteMigrations)

/**
 * A SQLite store read inside one read transaction, on a read-only connection of its own: the copy never
 * changes its source, not even its schema. The file must exist (the caller says so if it does not).
 */
export function openSqliteSnapshot (file: string): StoreSnapshot {
  const db = new Database(file, { readonly: true, fileMustExist: true })
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
    db.defaultSafeIntegers(true)
    db.exec('BEGIN')
    // The first read starts the snapshot every later read of this transaction sees.
    assertCopiableSchema(Number(db.pragma('user_version', { simple: true })), KNOWN_VERSION)
  } catch (error) {
    db.close()
    throw error
  }
  const statements = new StatementCache(db)
  return {
    async page (table, after, limit) {
      const columns = table.columns.map((column) => column.name).join(', ')
      const rows = after === undefined
        ? statements.get(`${table.name} first`, `SELECT ${columns} FROM ${table.name} ORDER BY id LIMIT ?`).all(limit)
        : statements.get(`${table.name} after`, `SELECT ${columns} FROM ${table.name} WHERE id > ? ORDER BY id LIMIT ?`).all(after, limit)
      return (rows as unknown[][]).map((row) => decodeRow(table, row))
    },
    async count (table) {
      return Number(db.prepare(`SELECT count(*) FROM ${table.name}`).pluck().get())
    },
    async close () {
      if (db.open) db.close()
    }
  }
}

/**
 * A SQLite store to copy into, written on a connection of its own in large transactions. No service may
 * use the file meanwhile: the copy holds the write lock for each batch.
 */
export function sqliteCopyTarget (file: string): CopyTarget {
  let db: SqliteDatabase | undefined
  let batch: TargetBatch | undefined
  return {
    async inspect () {
      return existsSync(file) ? inspectSqliteStore(file) : { schemaVersion: 0, plants: 0, tokens: 0, tokenNames: [], subscriptions: 0 }
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
      const names = table.columns.map((column) => column.name)
      const insert = statements.get(`${table.name} insert`,
        `INSERT INTO ${table.name} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')}) ON CONFLICT DO NOTHING`)
      let inserted = 0
      for (const row of rows) inserted += insert.run(...encodeRow(table, row)).changes
      return inserted
    },
    async insertWithNewIds (table, rows) {
      const names = table.columns.slice(1).map((column) => column.name)
      const insert = statements.get(`${table.name} insert new id`,
        `INSERT INTO ${table.name} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`)
      for (const row of rows) insert.run(...encodeRow(table, row).slice(1))
    },
    async stored (table, keys) {
      const select = statements.get(`${table.name} by id`, `SELECT ${columnList(table)} FROM ${table.name} WHERE id = ?`)
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
    return {
      schemaVersion,
      ...(marker === undefined ? {} : { marker: markerOfRow(marker) }),
      plants: count('plants'),
      tokens: count('access_tokens') + count('generated_access_token'),
      tokenNames,
      subscriptions: count('webhook_subscriptions')
    }
  } finally {
    db.close()
  }
}

/** Statements prepared once, used in raw mode (rows as arrays, in column order). */
class StatementCache {
  private readonly statements = new Map<string, Statement>()
  constructor (private readonly db: SqliteDatabase) {}

  get (name: string, sql: string): Statement {
    let statement = this.statements.get(name)
    if (statement === undefined) {
      statement = this.db.prepare(sql)
      if (statement.reader) statement.raw(true)
      this.statements.set(name, statement)
    }
    return statement
  }
}

function columnList (table: StoreTable): string {
  return table.columns.map((column) => column.name).join(', ')
}

/** A row as SQLite stores it: times as `toISOString()` text, exact to the millisecond. */
function encodeRow (table: StoreTable, row: StoreRow): unknown[] {
  return table.columns.map((column, index) => {
    const cell = row[index] ?? null
    return column.type === 'time' && cell !== null ? timeText(cell as bigint) : cell
  })
}

function decodeRow (table: StoreTable, raw: readonly unknown[]): StoreRow {
  return table.columns.map((column, index): Cell => {
    const value = raw[index]
    if (value === null || value === undefined) return null
    switch (column.type) {
      case 'int32': return Number(value)
      case 'time': return timeMicros(value as string, `${table.name}.${column.name}`)
      default: return value as Cell
    }
  })
}

function timeText (micros: bigint): string {
  return new Date(Number(micros / 1000n)).toISOString()
}

/** `toISOString()` text, as the store writes times: a UTC time with its `Z`, never one read in the local time zone. */
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/

function timeMicros (text: string, where: string): bigint {
  const milliseconds = ISO_TIME.test(text) ? Date.parse(text) : NaN
  if (Number.isNaN(milliseconds)) throw new Error(`${where} holds ${JSON.stringify(text)}, which is not a UTC time`)
  return BigInt(milliseconds) * 1000n
}
