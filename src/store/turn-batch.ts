/** A caller waiting in a batcher's queue for its own result. */
export interface Waiting<Item, Result> {
  readonly item: Item
  readonly resolve: (result: Result) => void
  readonly reject: (error: unknown) => void
  /** What the batcher's observer captured when the item was submitted. */
  readonly context?: unknown
}

/**
 * The batching that group commit and batched reads share: what arrives while a batch is under way
 * waits and then goes together in the next one. Nothing waits on a timer: an idle batcher starts at the
 * end of the current event-loop turn, so everything of that turn shares the first batch.
 */
export abstract class TurnBatch<Item, Result> {
  protected readonly queue: Array<Waiting<Item, Result>> = []
  private running = false
  private scheduled = false
  private idleWaiters: Array<() => void> = []

  protected enqueue (item: Item, context?: unknown): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push(context === undefined ? { item, resolve, reject } : { item, resolve, reject, context })
      if (!this.running && !this.scheduled) {
        this.scheduled = true
        setImmediate(this.drain)
      }
    })
  }

  /** Takes the next batch off the queue, runs it and answers its callers (or puts some back). */
  protected abstract runNextBatch (): Promise<void>

  /** Resolves once every queued item has been answered. */
  whenIdle (): Promise<void> {
    if (!this.running && !this.scheduled) return Promise.resolve()
    return new Promise((resolve) => { this.idleWaiters.push(resolve) })
  }

  private readonly drain = async (): Promise<void> => {
    this.scheduled = false
    this.running = true
    try {
      while (this.queue.length > 0) await this.runNextBatch()
    } finally {
      this.running = false
      for (const wake of this.idleWaiters.splice(0)) wake()
    }
  }
}
