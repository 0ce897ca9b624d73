/**
 * The messages between the SQLite adapter (searcher.ts, on the main thread) and its search thread
 * (search-thread.ts): a search's page or a count, and the answer. They cross by structured clone, so
 * ids stay `bigint`.
 */
import type { PageRequest, PlantFilter, PlantPage } from '../plant-store.js'

/** What the search thread is started with: its `workerData`. */
export interface SearchThreadData {
  readonly file: string
}

export type SearchRequest =
  | { readonly page: PageRequest }
  | { readonly count: PlantFilter }

/** The thread's first message, once its connection is open: a search's time counts from then. */
export const SEARCH_THREAD_READY = 'ready'

export type SearchReply =
  | typeof SEARCH_THREAD_READY
  | { readonly page: PlantPage }
  | { readonly count: number }
  | { readonly error: { readonly code: string | undefined, readonly message: string } }
