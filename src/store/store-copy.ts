/**
 * The two ends of `plantstore copy` (src/transfer/copy.ts), which each backend provides: a snapshot of
 * the store copied, and the store copied into, written batch by batch, each batch in one transaction
 * with the copy's record (its marker), so that an interrupted copy goes on exactly where it stopped.
 */
import { SchemaTooNewError } from './migration.js'
import type { Cell, StoreRow, StoreTable, TableName } from './store-rows.js'

/** What a copy's own connections may take (PostgreSQL's; SQLite waits on no server). */
export interface CopyConnectionOptions {
  readonly connectTimeoutMs: number
  /** How long one statement may take before the copy gives up on the server. */
  readonly queryTimeoutMs: number
}

/** The oldest schema a copy reads: the first with every table it copies (release 1.3.0). */
export const OLDEST_COPIED_SCHEMA = 4

/** Rows of one table added, found already there as they are, and found there otherwise (conflicts). */
export interface TableTally {
  readonly added: number
  readonly skipped: number
  readonly conflicts: number
}

export type CopyTally = Readonly<Partial<Record<TableName, TableTally>>>

/** The one-row record a copy keeps in its target (table `store_copy`). */
export interface CopyMarker {
  /** The store copied: `sqlite:<real path>` or `postgres://host:port/database`, never a password. */
  readonly source: string
  /** Milliseconds since the epoch. */
  readonly startedAt: number
  readonly finishedAt?: number
  /** Where an unfinished copy stands: the table being copied and the last key of it copied. */
  readonly position?: { readonly table: TableName, readonly after?: string }
  /** What the copy did so far, over every run of it. */
  readonly tally: CopyTally
}

/** How many token names TargetState holds. */
export const NAMED_TOKENS = 3

/** What a target holds before a copy touches it. */
export interface TargetState {
  /** 0 for a store that does not exist yet. */
  readonly schemaVersion: number
  readonly marker?: CopyMarker
  readonly plants: number
  readonly tokens: number
  /** The names of the first few tokens, oldest first. */
  readonly tokenNames: readonly string[]
  readonly subscriptions: number
  /** The head of its change log: 0 when it never numbered a change. */
  readonly changeLogHead: bigint
}

/**
 * Where a change log stands beside the changes it keeps: the greatest `seq` it ever numbered, and the
 * `seq` through which every change is gone (pruned).
 */
export interface ChangeLogBounds {
  readonly head: bigint
  readonly prunedThrough: bigint
}

/** A store read inside one snapshot (one read transaction) from its opening to its closing. */
export interface StoreSnapshot {
  /** Up to `limit` rows whose key follows `after`, in key order. */
  page (table: StoreTable, after: Cell | undefined, limit: number): Promise<StoreRow[]>
  count (table: StoreTable): Promise<number>
  /** Its change log's bounds, in the same snapshot as its rows; zeros for a schema without a change log. */
  changeLogBounds (): Promise<ChangeLogBounds>
  close (): Promise<void>
}

/** The writes of one batch, all in one transaction of the target. */
export interface TargetBatch {
  /** Inserts the rows whose key and other unique values are free; resolves with how many it inserted. */
  insert (table: StoreTable, rows: readonly StoreRow[]): Promise<number>
  /** Inserts rows of a table with `naturalKey` under ids the target picks. */
  insertWithNewIds (table: StoreTable, rows: readonly StoreRow[]): Promise<void>
  /** The stored rows of these keys (those that exist), in any order. */
  stored (table: StoreTable, keys: readonly Cell[]): Promise<StoreRow[]>
  /** The stored row with the natural key of `row`, if any. */
  storedAlike (table: StoreTable, row: StoreRow): Promise<StoreRow | undefined>
  /** The live tokens (neither revoked nor expired at `nowMicros`): their ids by name. */
  liveTokens (nowMicros: bigint): Promise<Map<string, string>>
  saveMarker (marker: CopyMarker): Promise<void>
  /** Tells the instances running on the target to read its tokens again (the token revision). */
  announceTokenChange (): Promise<void>
  /**
   * The head of the target's change log, which no write of the target may move until the batch commits
   * (PostgreSQL: the head's row stays locked, against the instances running on it).
   */
  changeLogHead (): Promise<bigint>
  /**
   * Moves the target's change log bounds up to these, never down, and removes the changes up to the new
   * pruned-through (none are kept there), waking the change streams of the instances running on it.
   */
  continueChangeLog (bounds: ChangeLogBounds): Promise<void>
}

export interface CopyTarget {
  /** What the target holds, read without changing it (not even its schema). */
  inspect (): Promise<TargetState>
  /** Creates the store or brings its schema up to date. */
  prepare (): Promise<void>
  /** Runs `work` in one transaction: all of its writes commit, or none. */
  batch<T> (work: (batch: TargetBatch) => Promise<T>): Promise<T>
  /** A row as the target stores it (SQLite keeps times to the millisecond), to compare with one it holds. */
  asStored (table: StoreTable, row: StoreRow): StoreRow
  close (): Promise<void>
}

/** Throws unless a source of this schema version can be copied by this release. */
export function assertCopiableSchema (version: number, known: number): void {
  if (version > known) throw new SchemaTooNewError(version, known)
  if (version === 0) throw new Error('it holds no plantstore store (no schema version)')
  if (version < OLDEST_COPIED_SCHEMA) {
    throw new Error(`its schema is at version ${version}, older than the copy reads (${OLDEST_COPIED_SCHEMA}): ` +
      'start this release\'s service on it once to bring it up to date, then copy it')
  }
}

/** The tally as the marker stores it, and back. */
export function tallyText (tally: CopyTally): string {
  return JSON.stringify(tally)
}

export function tallyOfText (text: string): CopyTally {
  return JSON.parse(text) as CopyTally
}

/** The marker as both backends store it (table `store_copy`, from schema version 5). */
export interface MarkerRow {
  readonly source: string
  readonly started_at: bigint | number
  readonly finished_at: bigint | number | null
  readonly copying: string | null
  readonly after_key: string | null
  readonly tally: string
}

export const MARKER_COLUMNS = 'source, started_at, finished_at, copying, after_key, tally'

export function markerOfRow (row: MarkerRow): CopyMarker {
  return {
    source: row.source,
    startedAt: Number(row.started_at),
    ...(row.finished_at === null ? {} : { finishedAt: Number(row.finished_at) }),
    ...(row.copying === null ? {} : { position: { table: row.copying as TableName, ...(row.after_key === null ? {} : { after: row.after_key }) } }),
    tally: tallyOfText(row.tally)
  }
}

/** The values of MARKER_COLUMNS, in order. */
export function markerValues (marker: CopyMarker): [string, number, number | null, string | null, string | null, string] {
  return [marker.source, marker.startedAt, marker.finishedAt ?? null, marker.position?.table ?? null, marker.position?.after ?? null, tallyText(marker.tally)]
}
