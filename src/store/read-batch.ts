import { TurnBatch } from './turn-batch.js'

/**
 * Reads of single rows batched as group commit batches writes: the reads that arrive while one batch is
 * being read go together in the next query, so many concurrent GETs share one round trip to the
 * database. If the query fails, exactly that batch's callers get the error.
 */
export class ReadBatch<Key, Row> extends TurnBatch<Key, Row | undefined> {
  /**
   * @param readMany reads the rows of these keys (some may be missing) and returns them by key
   * @param onBatchRead called with each batch's size: for tests and metrics
   */
  constructor (
    private readonly readMany: (keys: readonly Key[]) => Promise<ReadonlyMap<Key, Row>>,
    private readonly maxBatchSize: number,
    private readonly onBatchRead?: (size: number) => void
  ) {
    super()
  }

  read (key: Key): Promise<Row | undefined> {
    return this.enqueue(key)
  }

  protected async runNextBatch (): Promise<void> {
    const batch = this.queue.splice(0, this.maxBatchSize)
    let rows
    try {
      rows = await this.readMany([...new Set(batch.map((waiting) => waiting.item))])
    } catch (error) {
      for (const waiting of batch) waiting.reject(error)
      return
    }
    this.onBatchRead?.(batch.length)
    for (const waiting of batch) waiting.resolve(rows.get(waiting.item))
  }
}
