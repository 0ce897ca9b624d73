/**
 * Reads of single rows batched as group commit batches writes: the reads that arrive while one batch is
 * being read go together in the next query, so many concurrent GETs share one round trip to the
 * database. Nothing waits on a timer: a lone read goes out at the end of its event-loop turn. If the
 * query fails, exactly that batch's callers get the error.
 */
export class ReadBatch<Key, Row> {
  private readonly queue: Array<{ readonly key: Key, readonly resolve: (row: Row | undefined) => void, readonly reject: (error: unknown) => void }> = []
  private reading = false
  private scheduled = false

  /**
   * @param readMany reads the rows of these keys (some may be missing) and returns them by key
   * @param onBatchRead called with each batch's size: for tests and metrics
   */
  constructor (
    private readonly readMany: (keys: readonly Key[]) => Promise<ReadonlyMap<Key, Row>>,
    private readonly maxBatchSize: number,
    private readonly onBatchRead?: (size: number) => void
  ) {}

  read (key: Key): Promise<Row | undefined> {
    return new Promise((resolve, reject) => {
      this.queue.push({ key, resolve, reject })
      if (!this.reading && !this.scheduled) {
        this.scheduled = true
        setImmediate(this.drain)
      }
    })
  }

  private readonly drain = async (): Promise<void> => {
    this.scheduled = false
    this.reading = true
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatchSize)
        try {
          const rows = await this.readMany([...new Set(batch.map((pending) => pending.key))])
          this.onBatchRead?.(batch.length)
          for (const pending of batch) pending.resolve(rows.get(pending.key))
        } catch (error) {
          for (const pending of batch) pending.reject(error)
        }
      }
    } finally {
      this.reading = false
    }
  }
}
