/**
 * A store's tables as whole rows, the same on every backend: what `plantstore copy` reads from one store
 * and writes into another, beneath the store's own write path (no webhook events, no field checks: the
 * rows were checked when they were first written). Each backend maps these to its column types
 * (sqlite/store-rows.ts, postgres/store-rows.ts).
 */

import { foldName } from './plant-names.js'

/**
 * How a value travels between backends: `int64` as `bigint`, `int32` as `number`, `bytes` as a Buffer,
 * and `time` as microseconds since the epoch in a `bigint` (SQLite keeps `toISOString()` text, exact to
 * the millisecond; PostgreSQL a TIMESTAMPTZ, exact to the microsecond).
 */
export type ColumnType = 'int64' | 'int32' | 'text' | 'bytes' | 'time'
export type Cell = bigint | number | string | Buffer | null
/** One row, its cells in the order of its table's columns; the first is the key. */
export type StoreRow = readonly Cell[]

export interface StoreColumn {
  readonly name: string
  readonly type: ColumnType
  /** The schema version that added the column: a source of an older one is read with NULL in it. */
  readonly since?: number
}

/** A column a target computes from a row's other cells, with this release's code: never read from a source. */
export interface DerivedColumn extends StoreColumn {
  readonly of: (row: StoreRow) => Cell
}

export type TableName = 'access_tokens' | 'webhook_subscriptions' | 'plants' | 'webhook_outbox' | 'webhook_attempts' | 'plant_changes'

export interface StoreTable {
  readonly name: TableName
  /** What one row is called in messages, and many of them. */
  readonly noun: readonly [one: string, many: string]
  /** The columns, the key first (`id`, or the change log's `seq`). */
  readonly columns: readonly StoreColumn[]
  /** The schema version that added the table: a source of an older one has no rows of it. */
  readonly since?: number
  /**
   * Set for tables whose ids each store numbers itself (BIGSERIAL on PostgreSQL): the columns that tell
   * the same row in another store, for a row whose id is taken there by another one.
   */
  readonly naturalKey?: readonly string[]
  /** Columns the target derives from the copied ones (plants' folded names), after them. */
  readonly derived?: readonly DerivedColumn[]
}

const column = (name: string, type: ColumnType, since?: number): StoreColumn => ({ name, type, ...(since === undefined ? {} : { since }) })
const text = (...names: string[]) => names.map((name) => column(name, 'text'))

/**
 * The tables a copy moves, in the order it moves them: tokens first, so that a service started on a
 * target mid-copy finds tokens and does not make an `initial-admin` of its own. The change log comes
 * last, in `seq` order, added only above the target's head (copy-batch.ts).
 */
export const STORE_TABLES: readonly StoreTable[] = [
  {
    name: 'access_tokens',
    noun: ['access token', 'access tokens'],
    columns: [...text('id', 'name', 'scopes'), column('sha256', 'bytes'), column('created_at', 'time'), column('expires_at', 'time'), column('revoked_at', 'time')]
  },
  {
    name: 'webhook_subscriptions',
    noun: ['webhook subscription', 'webhook subscriptions'],
    columns: [
      ...text('id', 'url', 'events', 'secret'), column('created_at', 'int64'), column('disabled_at', 'int64'), column('disabled_reason', 'text'),
      column('delivered', 'int64'), column('failed', 'int64'), column('last_error', 'text'), column('last_error_at', 'int64'),
      column('previous_secret', 'text', 6), column('previous_secret_until', 'int64', 6)
    ]
  },
  {
    name: 'plants',
    noun: ['plant', 'plants'],
    columns: [column('id', 'int64'), ...text('name', 'tag')],
    derived: [{ name: 'name_folded', type: 'text', of: (row) => foldName(row[1] as string) }]
  },
  {
    name: 'webhook_outbox',
    noun: ['webhook event', 'webhook events'],
    columns: [
      column('id', 'int64'), ...text('subscription_id', 'event_id', 'event_type'), column('plant_id', 'int64'), column('body', 'text'),
      column('created_at', 'int64'), column('attempts', 'int32'), column('next_attempt_at', 'int64'), column('lease_until', 'int64'),
      column('lease_owner', 'text'), column('failed_at', 'int64')
    ],
    naturalKey: ['subscription_id', 'event_id']
  },
  {
    name: 'webhook_attempts',
    noun: ['delivery attempt', 'delivery attempts'],
    columns: [
      column('id', 'int64'), ...text('subscription_id', 'event_id', 'event_type'), column('attempt', 'int32'), column('status_code', 'int32'),
      column('error', 'text'), column('at', 'int64')
    ],
    naturalKey: ['subscription_id', 'event_id', 'attempt', 'at']
  },
  {
    name: 'plant_changes',
    noun: ['change', 'changes'],
    columns: [
      column('seq', 'int64'), column('plant_id', 'int64'), column('type', 'int32'), ...text('name', 'tag', 'left_tag'),
      column('committed_at', 'int64'), column('made_by', 'text')
    ],
    since: 11
  }
]

export function storeTable (name: TableName): StoreTable {
  const table = STORE_TABLES.find((candidate) => candidate.name === name)
  if (table === undefined) throw new Error(`no table ${name}`)
  return table
}

/** The table as a target writes it: its columns, then those it derives. */
export function writtenTable (table: StoreTable): StoreTable {
  return table.derived === undefined ? table : { ...table, columns: [...table.columns, ...table.derived] }
}

/** A row as a target writes it: its cells, then the derived ones. */
export function writtenRow (table: StoreTable, row: StoreRow): StoreRow {
  return table.derived === undefined ? row : [...row, ...table.derived.map((derived) => derived.of(row))]
}

/** The name of the table's key column, its first. */
export function keyColumn (table: StoreTable): string {
  return table.columns[0]?.name ?? 'id'
}

/** Whether a store at `schemaVersion` has the table. */
export function isInSchema (table: StoreTable, schemaVersion: number): boolean {
  return table.since === undefined || table.since <= schemaVersion
}

/** A column as a SELECT of a store at `schemaVersion` names it: NULL when that schema lacks it. */
export function selectedColumn (column: StoreColumn, schemaVersion: number, selected = column.name): string {
  return column.since !== undefined && column.since > schemaVersion ? 'NULL' : selected
}

/** The index of a column in its table's rows. */
export function columnIndex (table: StoreTable, name: string): number {
  const index = table.columns.findIndex((candidate) => candidate.name === name)
  if (index === -1) throw new Error(`${table.name} has no column ${name}`)
  return index
}

export function sameCell (a: Cell, b: Cell): boolean {
  if (Buffer.isBuffer(a) || Buffer.isBuffer(b)) return Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b)
  return a === b
}

export function sameRow (a: StoreRow, b: StoreRow): boolean {
  return a.length === b.length && a.every((cell, index) => sameCell(cell, b[index] ?? null))
}

/** A key as the copy's record keeps it (text), and back. */
export function keyText (key: Cell): string {
  return String(key)
}

export function keyOfText (table: StoreTable, text: string): Cell {
  return table.columns[0]?.type === 'int64' ? BigInt(text) : text
}
