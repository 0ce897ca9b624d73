import { SchemaTooNewError } from '../store/migration.js'
import { StoreOpenError } from '../store/plant-store.js'
import type { CopyConnectionOptions, CopyMarker, CopyTally, CopyTarget, StoreSnapshot, TableTally } from '../store/store-copy.js'
import { keyOfText, keyText, STORE_TABLES, storeTable, type Cell, type StoreRow, type StoreTable } from '../store/store-rows.js'
import type { StoreLocation, StoreTransfer } from '../store/store-transfer.js'
import { copyRows } from './copy-batch.js'
import { planCopy } from './copy-marker.js'

/** What a failure once the copy has begun adds to its line. */
const RESUMABLE = '; the rows copied so far are kept: run the same command again to finish the copy'

/** Rows per batch, each batch one transaction of the target (with the marker's new position). */
export const COPY_BATCH_ROWS = 5000

export interface CopyRequest {
  readonly from: StoreTransfer
  readonly to: StoreTransfer
  /** Copy into a target that holds data: add what it lacks, keep what it holds. */
  readonly merge: boolean
  readonly connection: CopyConnectionOptions
  readonly batchRows?: number
  /** Count the source's plants first, for `onProgress`'s total. */
  readonly countPlants?: boolean
  /** After each committed batch. */
  readonly onProgress?: (progress: CopyProgress) => void
  /** For each row kept as the target has it (or not copied), once its batch committed. */
  readonly onConflict?: (message: string) => void
}

export interface CopyProgress {
  readonly table: StoreTable
  /** Rows of the table this run has copied. */
  readonly rows: number
  /** Plants this run has copied, and how many the source holds when `countPlants` was asked. */
  readonly plants: number
  readonly plantsTotal?: number
}

export interface CopyResult {
  /** Over every run of this copy. */
  readonly tally: CopyTally
  readonly plantsThisRun: number
  /** When the copy this run finished was started, if an earlier run started it. */
  readonly resumedFrom?: number
}

/**
 * Copies the whole store `from` into the store `to`: access tokens, webhook subscriptions, plants,
 * pending webhook events, delivery attempts and the change log with its head and pruned-through, exactly
 * (ids, digests, sealed secrets, counters, times, each change's `seq`).
 * The source is read in one snapshot per run and never changed: its service should be stopped (or not
 * written) during a move. If it is written, the copy holds the source as it was when the run began, and
 * the writes after that are not in it; a run that resumes an interrupted copy reads a new snapshot from
 * where the last one stopped, so rows copied by the earlier run stay as they were then.
 * The target is written in batches, each in one transaction with the copy's marker, so that the same
 * copy run again after an interruption goes on after the last batch committed. The target is refused
 * when it holds data, unless `merge` (copy-marker.ts); a refused target is left as it was.
 */
export async function copyStore (request: CopyRequest): Promise<CopyResult> {
  const from = request.from.location
  const to = request.to.location
  if (from.identity === to.identity) throw new Error(`--from and --to name the same store, ${from.identity}`)
  const snapshot = await blame('the source', from, () => request.from.openCopySource(request.connection))
  const target = request.to.copyTarget(request.connection)
  try {
    const state = await blame('the target', to, () => target.inspect())
    const plan = planCopy(state, from.identity, request.merge)
    if (plan.action === 'refuse') throw new Error(`the target ${to.shown} ${plan.reason}`)
    await blame('the target', to, () => target.prepare())
    const plantsTotal = request.countPlants === true ? await blame('the source', from, () => snapshot.count(storeTable('plants'))) : undefined
    const marker: CopyMarker = plan.action === 'resume'
      ? plan.marker
      : { source: from.identity, startedAt: Date.now(), position: { table: STORE_TABLES[0]?.name ?? 'plants' }, tally: {} }
    const copy = new StoreCopy(request, snapshot, target, marker, plantsTotal)
    if (plan.action === 'start') await copy.saveMarker()
    await copy.run()
    return { tally: copy.marker.tally, plantsThisRun: copy.plants, ...(plan.action === 'resume' ? { resumedFrom: marker.startedAt } : {}) }
  } finally {
    await snapshot.close()
    await target.close()
  }
}

/** One run of a copy whose marker is saved in the target. */
class StoreCopy {
  plants = 0
  private readonly batchRows: number

  constructor (private readonly request: CopyRequest, private readonly snapshot: StoreSnapshot, private readonly target: CopyTarget,
    public marker: CopyMarker, private readonly plantsTotal: number | undefined) {
    this.batchRows = request.batchRows ?? COPY_BATCH_ROWS
  }

  saveMarker (): Promise<void> {
    return this.toTarget(() => this.target.batch((batch) => batch.saveMarker(this.marker)))
  }

  async run (): Promise<void> {
    const position = this.marker.position
    const first = Math.max(0, STORE_TABLES.findIndex((table) => table.name === position?.table))
    for (const [index, table] of STORE_TABLES.entries()) {
      if (index < first) continue
      const after = index === first && position?.after !== undefined ? keyOfText(table, position.after) : undefined
      await this.copyTable(table, after)
    }
    const bounds = await blame('the source', this.request.from.location, () => this.snapshot.changeLogBounds(), RESUMABLE)
    const finished: CopyMarker = { source: this.marker.source, startedAt: this.marker.startedAt, finishedAt: Date.now(), tally: this.marker.tally }
    await this.toTarget(() => this.target.batch(async (batch) => {
      // The target numbers its next change after the source's head, and resume points the source pruned expire there too.
      await batch.continueChangeLog(bounds)
      // Instances already running on the target read its tokens again within their poll.
      await batch.announceTokenChange()
      await batch.saveMarker(finished)
    }))
    this.marker = finished
  }

  /** Pages of the table in key order; the next page is read while the target writes this one. */
  private async copyTable (table: StoreTable, after: Cell | undefined): Promise<void> {
    let rows = 0
    let next = this.read(table, after)
    for (;;) {
      const page = await next
      const last = page.at(-1)?.[0]
      if (last === undefined) return
      next = page.length < this.batchRows ? Promise.resolve([]) : this.read(table, last)
      // Should the write fail, the read's outcome is never awaited: it must not count as unhandled.
      next.catch(() => {})
      await this.write(table, page, last ?? null)
      rows += page.length
      if (table.name === 'plants') this.plants += page.length
      this.request.onProgress?.({ table, rows, plants: this.plants, ...(this.plantsTotal === undefined ? {} : { plantsTotal: this.plantsTotal }) })
    }
  }

  private read (table: StoreTable, after: Cell | undefined): Promise<StoreRow[]> {
    return blame('the source', this.request.from.location, () => this.snapshot.page(table, after, this.batchRows), RESUMABLE)
  }

  private async write (table: StoreTable, page: readonly StoreRow[], last: Cell): Promise<void> {
    const nowMicros = BigInt(Date.now()) * 1000n
    const { copied, marker } = await this.toTarget(() => this.target.batch(async (batch) => {
      const copied = await copyRows(batch, this.target, table, page, nowMicros)
      const marker: CopyMarker = {
        ...this.marker,
        position: { table: table.name, after: keyText(last) },
        tally: { ...this.marker.tally, [table.name]: added(this.marker.tally[table.name], copied.tally) }
      }
      await batch.saveMarker(marker)
      return { copied, marker }
    }))
    this.marker = marker
    for (const conflict of copied.conflicts) this.request.onConflict?.(conflict)
  }

  /** A failure of the target, which keeps what was committed: the same command finishes the copy. */
  private toTarget<T> (work: () => Promise<T>): Promise<T> {
    return blame('the target', this.request.to.location, work, RESUMABLE)
  }
}

function added (tally: TableTally | undefined, more: TableTally): TableTally {
  return {
    added: (tally?.added ?? 0) + more.added,
    skipped: (tally?.skipped ?? 0) + more.skipped,
    conflicts: (tally?.conflicts ?? 0) + more.conflicts
  }
}

/** Runs `work`; its failure becomes one line naming the store it came from (never a password: see src/cli/copy.ts). */
async function blame<T> (side: string, location: StoreLocation, work: () => Promise<T>, hint = ''): Promise<T> {
  try {
    return await work()
  } catch (error) {
    throw new Error(`${side} ${location.shown}: ${reasonOf(error)}${hint}`, { cause: error })
  }
}

function reasonOf (error: unknown): string {
  if (error instanceof StoreOpenError) return error.message.replace(/^DATABASE_URL: /, '')
  if (error instanceof SchemaTooNewError || error instanceof Error) return error.message
  return String(error)
}
