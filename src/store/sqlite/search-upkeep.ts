import { INDEX_BATCH } from './search-index.js'
import type { SqliteWriter } from './writer.js'

/** How often the writer indexes what the writes noted, while there are writes. */
const INDEX_EVERY_MS = 1000

/**
 * When the writer moves the plants the writes noted into the search index (search-index.ts): a second
 * after writes, or at once when a full batch of them is waiting. One indexing at a time; a failed one
 * is tried again a second later (the notes stay, and searches read those plants' names meanwhile).
 */
export class SearchIndexUpkeep {
  #written = 0
  #indexing: Promise<void> | undefined
  readonly #timer: NodeJS.Timeout

  constructor (private readonly writer: SqliteWriter) {
    this.#timer = setInterval(() => { if (this.#written > 0) this.index() }, INDEX_EVERY_MS)
    this.#timer.unref()
  }

  /** Told after each committed write batch. */
  written (writes: number): void {
    this.#written += writes
    if (this.#written >= INDEX_BATCH) this.index()
  }

  /** Stops indexing; waits for an indexing under way. */
  async close (): Promise<void> {
    clearInterval(this.#timer)
    await this.#indexing
  }

  private index (): void {
    if (this.#indexing !== undefined) return
    this.#written = 0
    this.#indexing = this.writer.indexSearch().then(() => {}, () => { this.#written += 1 })
      .finally(() => { this.#indexing = undefined })
  }
}
