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

export type SearchReply =
  | { readonly page: PlantPage }
  | { readonly count: number }
  | { readonly error: { readonly code: string | undefined, readonly message: string } }
