import type { PlantStore, StoreObserver } from './plant-store.js'
import { TurnBatch, type Waiting } from './turn-batch.js'
import { idOf, type WriteOperation, type WriteOutcome, type WriteResult } from './write-operations.js'

/** Returned by a batch for an operation that must run again in a later batch (a race it cannot settle). */
export const RUN_AGAIN = Symbol('run again')

/**
 * Commits one batch in one transaction and returns each operation's result, in order. It rejects when
 * the transaction did not commit; then no operation of the batch took effect.
 */
export type CommitBatch = (operations: readonly WriteOperation[]) => Promise<ReadonlyArray<WriteOutcome | typeof RUN_AGAIN>>

export interface GroupCommitOptions {
  readonly backend: PlantStore['backend']
  /** The most operations one transaction takes. */
  readonly maxBatchSize: number
  /** Called after each committed batch with its size: for tests and metrics. */
  readonly onBatchCommitted?: ((size: number) => void) | undefined
  /**
   * Whether a batch's failure means the database is out of reach (a connection timed out or failed):
   * then the writes queued behind the batch get the same error at once instead of each waiting out its
   * own timeout, so every write's wait stays within one timeout.
   */
  readonly isOutage?: ((error: unknown) => boolean) | undefined
}

type Pending = Waiting<WriteOperation, WriteOutcome>

/**
 * Group commit: writes that arrive while a batch is being committed wait and then go together in the
 * next transaction, so many requests share one fsync. Nothing waits on a timer: an idle store commits a
 * lone write at the end of the current event-loop turn. Every caller is answered with its own result
 * only after its batch committed; if the commit fails, exactly that batch's callers get the error.
 *
 * An id appears in one batch at most once, creates excepted (a create and its retries settle among
 * themselves): the batch is cut before any other repeat. So the writes of one id are answered as they
 * would be one after another, in arrival order, and a batch's operations on different ids commute: the
 * backend may run them in any order.
 */
export class GroupCommit extends TurnBatch<WriteOperation, WriteOutcome> {
  /** Told about every batch (PlantStore.observe). */
  observer: StoreObserver | undefined

  constructor (private readonly commitBatch: CommitBatch, private readonly options: GroupCommitOptions) {
    super()
  }

  submit<Operation extends WriteOperation> (operation: Operation): Promise<WriteResult<Operation>> {
    return this.enqueue(operation, this.observer?.writeSubmitted?.()) as Promise<WriteResult<Operation>>
  }

  protected async runNextBatch (): Promise<void> {
    const batch = this.takeBatch()
    const observer = this.observer
    const startedAt = observer === undefined ? 0 : performance.now()
    let results
    try {
      results = await this.commitBatch(batch.map((pending) => pending.item))
    } catch (error) {
      if (observer !== undefined) this.report(observer, batch, startedAt, false)
      const failed = this.options.isOutage?.(error) === true ? [...batch, ...this.queue.splice(0)] : batch
      for (const pending of failed) pending.reject(error)
      return
    }
    if (observer !== undefined) this.report(observer, batch, startedAt, true)
    this.options.onBatchCommitted?.(batch.length)
    batch.forEach((pending, index) => {
      const result = results[index]
      if (result === RUN_AGAIN || result === undefined) this.queue.push(pending)
      else pending.resolve(result)
    })
  }

  private report (observer: StoreObserver, batch: readonly Pending[], startedAt: number, committed: boolean): void {
    observer.writeBatchEnded({
      backend: this.options.backend,
      size: batch.length,
      startedAt,
      seconds: (performance.now() - startedAt) / 1000,
      committed,
      submitted: observer.writeSubmitted === undefined ? [] : batch.map((pending) => pending.context)
    })
  }

  private takeBatch (): Pending[] {
    const kindById = new Map<bigint, WriteOperation['kind']>()
    let size = 0
    for (const { item: operation } of this.queue) {
      if (size === this.options.maxBatchSize) break
      const id = idOf(operation)
      const seen = kindById.get(id)
      if (seen !== undefined && (seen !== 'create' || operation.kind !== 'create')) break
      kindById.set(id, operation.kind)
      size++
    }
    return this.queue.splice(0, size)
  }
}

/** A durable adapter's write operations: each one submitted to its group commit. */
export function groupCommittedWrites (writes: GroupCommit): Pick<PlantStore, 'create' | 'put' | 'patch' | 'delete'> {
  return {
    create: (plant) => writes.submit({ kind: 'create', plant }),
    put: (plant, expected) => writes.submit({ kind: 'put', plant, expected }),
    patch: (id, patch, expected) => writes.submit({ kind: 'patch', id, patch, expected }),
    delete: (id, expected) => writes.submit({ kind: 'delete', id, expected })
  }
}
