/**
 * The storage port: everything the HTTP layer needs from a backend. Adapters (memory, SQLite,
 * PostgreSQL) implement it; routes and the app depend only on this file.
 *
 * Ids cross the port as `bigint` so every int64 is exact on every backend.
 */
import type { PlantJson } from './plant-document.js'
import type { AccessTokenStore } from './access-token-store.js'
import type { ChangeLog } from './change-log.js'
import type { WebhookStore } from './webhook-store.js'
import type { CreateOutcome, DeleteOutcome, Expectation, PatchOutcome, PlanOutcome, PlantPatchRecord, PutOutcome, WritePlan } from './write-operations.js'
import type { PlantRecord } from './plant-record.js'

// The port's words, defined beside what makes and decides them.
export { plantRecord, recordOfRow, samePlant, sameState, type PlantRecord, type PlantRow } from './plant-record.js'
export { outcomeOfMeeting, type CreateOutcome, type DeleteOutcome, type Expectation, type PatchOutcome, type PlantPatchRecord, type PutOutcome, type Stale } from './write-operations.js'

/**
 * A page of plants: `json` is a JSON array of PlantJson documents, or, when the request asked for
 * `lines`, NDJSON: each document followed by a line feed (no text at all for an empty page).
 */
export interface PlantPage {
  readonly json: string
  /** The last id on this page when more plants follow it; absent on the last page. */
  readonly nextAfter?: bigint
  /** In a name order, the name of that last plant (with `nextAfter`, where the next page starts). */
  readonly nextName?: string
}

/**
 * The orders a page can be read in: by id, or by name (by Unicode code points, ties by id), each either
 * way; `-name` is exactly the reverse of `name`.
 */
export type PlantOrder = 'id' | '-id' | 'name' | '-name'

/** Which plants a page or a count holds: those that pass every filter given (all of them when none is). */
export interface PlantFilter {
  /** Only plants whose tag is exactly this (an index serves it); plants without a tag never match. */
  readonly tag?: string
  /** Only plants whose folded name holds this text folded (`foldName`), as a substring; 1 to 100 characters. */
  readonly q?: string
}

/** A plant's place in a name order: a page starts after it (exclusive). */
export interface NamePosition {
  readonly name: string
  readonly id: bigint
}

interface PageSize {
  readonly limit: number
  /** The page as NDJSON lines instead of a JSON array: what an export streams. */
  readonly lines?: boolean
}

/** A page in id order (the default), after the id `after` in that order (it need not exist), or from the start. */
export interface IdPageRequest extends PlantFilter, PageSize {
  readonly order?: 'id' | '-id'
  readonly after?: bigint
}

/** A page in name order, after the plant at `after`, or from the start. */
export interface NamePageRequest extends PlantFilter, PageSize {
  readonly order: 'name' | '-name'
  readonly after?: NamePosition
}

export type PageRequest = IdPageRequest | NamePageRequest

export interface PlantStore {
  /** Which backend this is, for the start-up log line. */
  readonly backend: 'memory' | 'sqlite' | 'postgres'
  /**
   * Creates the plant unless its id is taken. Resolves only once a created plant is durably committed.
   * Rejects with StoreUnavailableError when the database cannot serve the request right now. Every
   * write records its change in the change log in its transaction, as made `by` whom (a token's name,
   * `jwt:<sub>`, `cli`).
   */
  create (plant: PlantRecord, by?: string): Promise<CreateOutcome>
  /** The plant with this id as its JSON document, or undefined. */
  get (id: bigint): Promise<PlantJson | undefined>
  /**
   * Up to `limit` plants that pass the filter, in the request's order, starting after `after`
   * (exclusive) or at the start. Keyset pagination read from an index: the cost does not grow with the
   * position in the store, nor, for a `tag`, with the number of plants that have other tags. A search
   * (`q`) shorter than its index serves reads every name, bounded by the statement timeout (a
   * StoreUnavailableError after it).
   */
  list (page: PageRequest): Promise<PlantPage>
  /** How many plants pass the filter; bounded by the statement timeout like a search. */
  count (filter: PlantFilter): Promise<number>
  /**
   * Creates the plant or replaces the stored one with this id whole. Like every write below, it
   * resolves once durably committed, and only takes effect when `expected` (if given) still holds.
   */
  put (plant: PlantRecord, expected?: Expectation, by?: string): Promise<PutOutcome>
  /** Applies a merge patch to the stored plant. */
  patch (id: bigint, patch: PlantPatchRecord, expected?: Expectation, by?: string): Promise<PatchOutcome>
  /** Deletes the plant. */
  delete (id: bigint, expected?: Expectation, by?: string): Promise<DeleteOutcome>
  /**
   * Writes a plan of changes (a batch) in one transaction, durably, whole or not at all, and only while
   * every id it expects still holds what it expects (a compare-and-set of many plants); `stale` otherwise,
   * with nothing written.
   */
  writePlan (plan: WritePlan, by?: string): Promise<PlanOutcome>
  /** The access tokens kept in this store. */
  readonly tokens: AccessTokenStore
  /** Webhook subscriptions and the outbox the writes above fill. */
  readonly webhooks: WebhookStore
  /** The changes the writes above record. */
  readonly changes: ChangeLog
  /** Resolves when the database answers; rejects with StoreUnavailableError otherwise. */
  ping (): Promise<void>
  /**
   * Resolves when the store can take writes right now; rejects with a StoreUnavailableError saying why
   * not: unreachable, read-only (a standby, a read-only database), out of disk space. Cheap enough for a
   * readiness probe every few seconds: no write, one round trip at most.
   */
  checkWritable (): Promise<void>
  /** Reports this store's write batches to `observer` from now on (metrics, traces); the app sets it once. */
  observe (observer: StoreObserver): void
  /** PostgreSQL only: the connection pool's use right now. */
  readonly poolUsage?: () => PoolUsage
  /** Finishes pending work and releases the database. */
  close (): Promise<void>
}

/** What a store tells about its write batches. */
export interface StoreObserver {
  /**
   * Called in the caller's context as each write is submitted to a batch; what it returns is handed
   * back with the batch that commits the write (a tracer returns the request's span context here).
   */
  readonly writeSubmitted?: (() => unknown) | undefined
  /** A write batch's transaction ended, committed or not. */
  readonly writeBatchEnded: (batch: WriteBatchReport) => void
}

export interface WriteBatchReport {
  readonly backend: PlantStore['backend']
  /** How many writes the transaction held. */
  readonly size: number
  /** When the transaction started, on `performance.now()`'s clock. */
  readonly startedAt: number
  readonly seconds: number
  readonly committed: boolean
  /** What `writeSubmitted` returned for each write of the batch, when the observer has one. */
  readonly submitted: readonly unknown[]
}

export interface PoolUsage {
  /** Connections open now, idle or in use. */
  readonly total: number
  readonly idle: number
  /** Queries waiting for a connection. */
  readonly waiting: number
  /** The most connections the pool opens (DATABASE_POOL_SIZE). */
  readonly max: number
}

/**
 * The page of `request.limit` plants out of `documents`, which holds the page's documents and, when more
 * plants follow, one more (read to find that out); `idOf(index)` is the id of a document, and in a name
 * order `nameOf(index)` its name.
 */
export function pageOf (
  documents: readonly PlantJson[],
  request: PageRequest,
  idOf: (index: number) => bigint,
  nameOf?: (index: number) => string
): PlantPage {
  const { limit } = request
  const more = documents.length > limit
  const page = more ? documents.slice(0, limit) : documents
  const json = request.lines === true
    ? (page.length === 0 ? '' : `${page.join('\n')}\n`)
    : `[${page.join(',')}]`
  if (!more) return { json }
  const nextAfter = idOf(limit - 1)
  if (!isNameOrder(request)) return { json, nextAfter }
  if (nameOf === undefined) throw new Error('a page in name order needs the names of its plants')
  return { json, nextAfter, nextName: nameOf(limit - 1) }
}

export function isNameOrder (request: PageRequest): request is NamePageRequest {
  return request.order === 'name' || request.order === '-name'
}

/** Thrown by adapters when the database cannot serve the request right now (busy, down, full); a 503. */
export class StoreUnavailableError extends Error {
  constructor (message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}

/** The store named by `DATABASE_URL` cannot be opened at all (not "not now"): the start stops with this message. */
export class StoreOpenError extends Error {
  constructor (message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'StoreOpenError'
  }
}
