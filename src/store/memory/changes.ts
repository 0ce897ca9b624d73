import {
  CHANGE_TYPES, ChangeSignal, changeTypeCode, leftTagOf, type ChangeFeedJsonPage, type ChangeFeedPage, type ChangeFeedRequest, type ChangeLog, type ChangeLogExtent, type ChangeRecord,
  type HistoryRequest, type PendingChange
} from '../change-log.js'
import { jsonPageOf } from '../change-document.js'

/** The memory store's change log: an array in `seq` order, pruned from its start. */
export class MemoryChangeLog implements ChangeLog {
  private kept: ChangeRecord[] = []
  private readonly signal = new ChangeSignal()
  private lastSeq = 0n
  private prunedThrough = 0n

  /** Records a write's changes; the memory store applies each write at once, so each is its own commit. */
  record (changes: readonly PendingChange[]): void {
    const at = Date.now()
    for (const pending of changes) {
      const type = CHANGE_TYPES[changeTypeCode(pending) - 1] as ChangeRecord['type']
      const seq = ++this.lastSeq
      const leftTag = leftTagOf(pending)
      const left = leftTag === null ? {} : { leftTag }
      const change: ChangeRecord = pending.after === undefined
        ? { seq, type, id: pending.id, at, by: pending.by, ...left }
        : { seq, type, id: pending.id, plant: pending.after, at, by: pending.by, ...left }
      this.kept.push(change)
    }
    this.signal.notify()
  }

  watch (listener: () => void): () => void {
    return this.signal.add(listener)
  }

  async head (): Promise<bigint> {
    return this.lastSeq
  }

  async read (request: ChangeFeedRequest): Promise<ChangeFeedPage> {
    if (request.after < this.prunedThrough) return { status: 'expired' }
    const start = this.indexAfter(request.after)
    const first = this.kept[start]
    if (first !== undefined && first.at < request.keptSince) return { status: 'expired' }
    const changes: ChangeRecord[] = []
    for (let index = start; index < this.kept.length && changes.length < request.limit; index++) {
      const change = this.kept[index] as ChangeRecord
      if (request.types !== undefined && !request.types.includes(change.type)) continue
      if (request.tag !== undefined && change.plant?.tag !== request.tag && change.leftTag !== request.tag) continue
      changes.push(change)
    }
    return { status: 'page', changes }
  }

  async readJson (request: ChangeFeedRequest): Promise<ChangeFeedJsonPage> {
    return jsonPageOf(await this.read(request))
  }

  async history ({ id, before, limit }: HistoryRequest): Promise<readonly ChangeRecord[]> {
    const changes: ChangeRecord[] = []
    for (let index = this.kept.length - 1; index >= 0 && changes.length < limit; index--) {
      const change = this.kept[index] as ChangeRecord
      if (change.id === id && (before === undefined || change.seq < before)) changes.push(change)
    }
    return changes
  }

  async prune (before: number, limit: number): Promise<number> {
    let count = 0
    while (count < limit && count < this.kept.length && (this.kept[count] as ChangeRecord).at < before) count++
    if (count === 0) return 0
    this.prunedThrough = (this.kept[count - 1] as ChangeRecord).seq
    this.kept = this.kept.slice(count)
    return count
  }

  async extent (): Promise<ChangeLogExtent> {
    return { head: this.lastSeq, kept: this.kept.length, oldestSeq: this.kept[0]?.seq }
  }

  /** The index of the first kept change with a `seq` above `after` (binary search: `seq` ascends). */
  private indexAfter (after: bigint): number {
    let low = 0
    let high = this.kept.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if ((this.kept[middle] as ChangeRecord).seq <= after) low = middle + 1
      else high = middle
    }
    return low
  }
}
