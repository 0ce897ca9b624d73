import Database, { type SqliteDatabase, type Statement } from './driver.js'
import { sqliteMigrations } from './migrations.js'
import { latestVersion } from '../migration.js'
import { assertCopiableSchema, type StoreSnapshot } from '../store-copy.js'
import { isInSchema, keyColumn, selectedColumn, storeTable, type Cell, type StoreRow, type StoreTable } from '../store-rows.js'

/** A copy waits this long for another connection's lock (a backup, a checkpoint) before it gives up. */
export const BUSY_TIMEOUT_MS = 5000
/** The newest schema this release knows. */
export const KNOWN_VERSION = latestVersion(sqliteMigrations)

/**
 * A SQLite store read inside one read transaction, on a read-only connection of its own: the copy never
 * changes its source, not even its schema. The file must exist (the caller says so if it does not).
 */
export function openSqliteSnapshot (file: string): StoreSnapshot {
  const db = new Database(file, { readonly: true, fileMustExist: true })
  let schemaVersion = 0
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
    db.defaultSafeIntegers(true)
    db.exec('BEGIN')
    // The first read starts the snapshot every later read of this transaction sees.
    schemaVersion = Number(db.pragma('user_version', { simple: true }))
    assertCopiableSchema(schemaVersion, KNOWN_VERSION)
  } catch (error) {
    db.close()
    throw error
  }
  const statements = new StatementCache(db)
  return {
    async page (table, after, limit) {
      if (!isInSchema(table, schemaVersion)) return []
      const columns = table.columns.map((column) => selectedColumn(column, schemaVersion)).join(', ')
      const key = keyColumn(table)
      const rows = after === undefined
        ? statements.get(`${table.name} first`, `SELECT ${columns} FROM ${table.name} ORDER BY ${key} LIMIT ?`).all(limit)
        : statements.get(`${table.name} after`, `SELECT ${columns} FROM ${table.name} WHERE ${key} > ? ORDER BY ${key} LIMIT ?`).all(after, limit)
      return (rows as unknown[][]).map((row) => decodeRow(table, row))
    },
    async count (table) {
      return isInSchema(table, schemaVersion) ? Number(db.prepare(`SELECT count(*) FROM ${table.name}`).pluck().get()) : 0
    },
    async changeLogBounds () {
      if (!isInSchema(storeTable('plant_changes'), schemaVersion)) return { head: 0n, prunedThrough: 0n }
      const [head, prunedThrough] = statements.get('change log bounds', 'SELECT head, pruned_through FROM change_log WHERE singleton = 1').get() as [bigint, bigint]
      return { head, prunedThrough }
    },
    async close () {
      if (db.open) db.close()
    }
  }
}

/** Statements prepared once, used in raw mode (rows as arrays, in column order). */
export class StatementCache {
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

/** The table's column names, in its rows' order, for a SELECT or an INSERT. */
export function columnList (table: StoreTable): string {
  return table.columns.map((column) => column.name).join(', ')
}

/** A row as SQLite stores it: times as `toISOString()` text, exact to the millisecond. */
export function encodeRow (table: StoreTable, row: StoreRow): unknown[] {
  return table.columns.map((column, index) => {
    const cell = row[index] ?? null
    return column.type === 'time' && cell !== null ? timeText(cell as bigint) : cell
  })
}

/** A row as the driver returns it in raw mode (integers as `bigint`), as every backend's rows are. */
export function decodeRow (table: StoreTable, raw: readonly unknown[]): StoreRow {
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

/** A time as SQLite stores it (`toISOString()`): microseconds since the epoch, cut to the millisecond. */
export function timeText (micros: bigint): string {
  return new Date(Number(micros / 1000n)).toISOString()
}

/** `toISOString()` text, as the store writes times: a UTC time with its `Z`, never one read in the local time zone. */
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/

function timeMicros (text: string, where: string): bigint {
  const milliseconds = ISO_TIME.test(text) ? Date.parse(text) : NaN
  if (Number.isNaN(milliseconds)) throw new Error(`${where} holds ${JSON.stringify(text)}, which is not a UTC time`)
  return BigInt(milliseconds) * 1000n
}
