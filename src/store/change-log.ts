/**
 * The part of the storage port that keeps the change log (docs/reference/api/changes.md): every write that
 * changes a plant records one change in its own transaction, numbered by `seq` in commit order, kept for
 * CHANGES_RETENTION. The HTTP layer reads pages of it, a plant's history, and the head.
 *
 * Times are milliseconds since the epoch, taken from the writer's clock.
 */
import { plantRecord, type PlantRecord } from './plant-record.js'

export const CHANGE_TYPES = ['plant.created', 'plant.updated', 'plant.deleted'] as const
export type ChangeType = typeof CHANGE_TYPES[number]

/** One change as the log keeps it. */
export interface ChangeRecord {
  readonly seq: bigint
  readonly type: ChangeType
  readonly id: bigint
  /** The plant after the change; absent for `plant.deleted`. */
  readonly plant?: PlantRecord
  /** When the write committed (close enough: when its transaction wrote the change). */
  readonly at: number
  /** The plant's tag before the change, only when it differs from its tag after (a deleted plant has none after). */
  readonly leftTag?: string
  /** Who made it: the token's name, `jwt:<sub>`, or `cli`. */
  readonly by: string
}

export interface ChangeFeedRequest {
  /** Changes with a greater `seq` than this. */
  readonly after: bigint
  readonly limit: number
  /** Only the changes of plants that had this tag before or after the change. */
  readonly tag?: string | undefined
  /** Only changes of these types; all of them when undefined. */
  readonly types?: readonly ChangeType[] | undefined
  /** Changes written before this time are past the retention: a page that would start with one is expired. */
  readonly keptSince: number
}

/**
 * A page of the feed, or `expired` when a change after `after` is no longer kept (pruned, or past the
 * retention and about to be): the client must read the plants again.
 */
export type ChangeFeedPage =
  | { readonly status: 'page', readonly changes: readonly ChangeRecord[] }
  | { readonly status: 'expired' }

/** A page of the feed as the route answers it: a JSON array of change documents, and the page's last `seq`. */
export type ChangeFeedJsonPage =
  | { readonly status: 'page', readonly json: string, readonly lastSeq: bigint | undefined }
  | { readonly status: 'expired' }

export interface HistoryRequest {
  readonly id: bigint
  /** Only changes older than this `seq` (the next page of a history, which runs newest first). */
  readonly before?: bigint | undefined
  readonly limit: number
}

/** What the log holds: `kept` changes, from `oldestSeq` to the head. */
export interface ChangeLogExtent {
  readonly head: bigint
  readonly kept: number
  /** Undefined when no change is kept. */
  readonly oldestSeq: bigint | undefined
}

export interface ChangeLog {
  /** The greatest `seq` ever committed (pruning never lowers it); 0 when none. */
  head (): Promise<bigint>
  /** Up to `limit` changes after `after`, `seq` ascending, that pass the filters. */
  read (request: ChangeFeedRequest): Promise<ChangeFeedPage>
  /** The same page as the feed answers it: its JSON text (change-document.ts) and its last `seq`. */
  readJson (request: ChangeFeedRequest): Promise<ChangeFeedJsonPage>
  /** Up to `limit` kept changes of one plant, newest first. */
  history (request: HistoryRequest): Promise<readonly ChangeRecord[]>
  /**
   * Deletes up to `limit` of the oldest changes written before `before`, in one short transaction of
   * its own; how many it deleted. Retention calls it again until it deletes fewer than `limit`.
   */
  prune (before: number, limit: number): Promise<number>
  /** The head, how many changes are kept and the oldest kept `seq`: cheap, for metrics. */
  extent (): Promise<ChangeLogExtent>
  /**
   * Calls `listener` soon after changes may have been committed: at once for this process's writes, and
   * for other instances' where the backend announces them (PostgreSQL's NOTIFY). Changes committed by
   * other processes otherwise show only to a read: a follower polls as well. Returns the unwatch.
   */
  watch (listener: () => void): () => void
}

/** The listeners of `ChangeLog.watch`. */
export class ChangeSignal {
  private readonly listeners = new Set<() => void>()

  add (listener: () => void): () => void {
    this.listeners.add(listener)
    return () => { this.listeners.delete(listener) }
  }

  get watched (): boolean {
    return this.listeners.size > 0
  }

  notify (): void {
    for (const listener of this.listeners) listener()
  }
}

/**
 * A change as a write hands it to its transaction: the plant's id, its tag before the change (null:
 * none, or no plant) and the plant after it (undefined: deleted), and who made it.
 */
export interface PendingChange {
  readonly id: bigint
  readonly tagBefore: string | null
  readonly created: boolean
  readonly after: PlantRecord | undefined
  readonly by: string
}

/** Who a write is recorded as made by when the caller does not say: only tests of the stores themselves write so. */
export const UNNAMED_WRITER = 'unnamed'
/** Who the writes of a command (`plantstore import`) are recorded as made by. */
export const COMMAND_LINE_WRITER = 'cli'

/** The type code a change row stores (a small integer instead of the type's text). */
export function changeTypeCode (change: PendingChange): 1 | 2 | 3 {
  return change.after === undefined ? 3 : change.created ? 1 : 2
}

export const TYPE_OF_CODE: Readonly<Record<number, ChangeType>> = { 1: 'plant.created', 2: 'plant.updated', 3: 'plant.deleted' }
export const CODE_OF_TYPE: Readonly<Record<ChangeType, number>> = { 'plant.created': 1, 'plant.updated': 2, 'plant.deleted': 3 }

/**
 * The tag a change row keeps besides the plant's tag after the change: its tag before, only when that
 * differs, so that a `tag` filter finds a plant leaving the tag through an index of this column alone.
 */
export function leftTagOf (change: PendingChange): string | null {
  const after = change.after?.tag ?? null
  return change.tagBefore === after ? null : change.tagBefore
}

/** A change row as the SQL adapters read it. */
export interface ChangeRow {
  readonly seq: bigint
  readonly plant_id: bigint
  readonly type: number | bigint
  readonly name: string | null
  readonly tag: string | null
  readonly left_tag: string | null
  readonly at: number | bigint
  readonly by: string
}

export function changeOfRow (row: ChangeRow): ChangeRecord {
  const type = TYPE_OF_CODE[Number(row.type)]
  if (type === undefined) throw new Error(`change ${row.seq} has an unknown type ${row.type}`)
  const at = Number(row.at)
  const left = row.left_tag === null ? {} : { leftTag: row.left_tag }
  if (type === 'plant.deleted' || row.name === null) return { seq: row.seq, type, id: row.plant_id, at, by: row.by, ...left }
  return { seq: row.seq, type, id: row.plant_id, plant: plantRecord(row.plant_id, row.name, row.tag), at, by: row.by, ...left }
}
