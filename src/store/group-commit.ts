import type { PlantStore, StoreObserver } from './plant-store.js'
import { TurnBatch, type Waiting } from './turn-batch.js'
import { idsOf, weightOf, type WritePlan, type WriteOperation, type WriteOutcome, type WriteResult } from './write-operations.js'

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
    this.options.onBatchCommitted?.(batch.reduce((size, pending) => size + weightOf(pending.item), 0))
    batch.forEach((pending, index) => {
      const result = results[index]
      if (result === RUN_AGAIN || result === undefined) this.queue.push(pending)
      else pending.resolve(result)
    })
  }

  private report (observer: StoreObserver, batch: readonly Pending[], startedAt: number, committed: boolean): void {
    observer.writeBatchEnded({
      backend: this.options.backend,
      size: batch.reduce((size, pending) => size + weightOf(pending.item), 0),
      startedAt,
      seconds: (performance.now() - startedAt) / 1000,
      committed,
      submitted: observer.writeSubmitted === undefined ? [] : batch.map((pending) => pending.context)
    })
  }

  /**
   * The writes of the next transaction, from the front of the queue: up to maxBatchSize of weight (a plan
   * weighs its changes; the first write is taken whatever it weighs), cut before a write whose id an
   * earlier one of the batch touched, creates of one id excepted.
   */
  private takeBatch (): Pending[] {
    const kindById = new Map<bigint, WriteOperation['kind']>()
    let taken = 0
    let weight = 0
    for (const { item: operation } of this.queue) {
      weight += weightOf(operation)
      if (taken > 0 && weight > this.options.maxBatchSize) break
      const ids = [...idsOf(operation)]
      if (ids.some((id) => { const seen = kindById.get(id); return seen !== undefined && (seen !== 'create' || operation.kind !== 'create') })) break
      for (const id of ids) kindById.set(id, operation.kind)
      taken++
    }
    return this.queue.splice(0, taken)
  }
}

/** A durable adapter's write operations: each one submitted to its group commit. */
export function groupCommittedWrites (writes: GroupCommit): Pick<PlantStore, 'create' | 'put' | 'patch' | 'delete' | 'writePlan'> {
  return {
    create: (plant, by) => writes.submit({ kind: 'create', plant, by }),
    put: (plant, expected, by) => writes.submit({ kind: 'put', plant, expected, by }),
    patch: (id, patch, expected, by) => writes.submit({ kind: 'patch', id, patch, expected, by }),
    delete: (id, expected, by) => writes.submit({ kind: 'delete', id, expected, by }),
    writePlan: (plan: WritePlan, by) => writes.submit({ kind: 'plan', plan, by })
  }
}
