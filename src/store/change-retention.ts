import type { ChangeLog } from './change-log.js'

/** How many changes one pruning transaction deletes: short enough that a write waits for one at most a few milliseconds. */
export const PRUNE_CHUNK = 500
/** How often retention looks for expired changes, at most (a shorter retention looks as often as a tenth of it). */
const PRUNE_EVERY_MS = 60_000
/** A pause between chunks, so pruning a long backlog leaves the database to the writes in between. */
const CHUNK_PAUSE_MS = 5

export interface RetentionLog {
  warn (message: string): void
}

/**
 * Deletes the changes older than CHANGES_RETENTION, in chunks of PRUNE_CHUNK, each its own transaction,
 * with a pause between them; then waits until the next round. Reads never serve an expired change
 * meanwhile: they judge expiry by the commit time themselves. Every instance prunes; the chunks of two
 * instances simply find less to do.
 */
export class ChangeRetention {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false
  private lastFailureLogAt = 0

  constructor (private readonly changes: ChangeLog, private readonly retentionMs: number, private readonly log: RetentionLog) {}

  start (): void {
    this.schedule(0)
  }

  async stop (): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }

  /** One round: every expired change pruned, chunk by chunk; how many. */
  async pruneExpired (): Promise<number> {
    let pruned = 0
    for (;;) {
      const deleted = await this.changes.prune(Date.now() - this.retentionMs, PRUNE_CHUNK)
      pruned += deleted
      if (deleted < PRUNE_CHUNK || this.stopped) return pruned
      await new Promise((resolve) => setTimeout(resolve, CHUNK_PAUSE_MS))
    }
  }

  private schedule (delayMs: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => {
      this.running = this.pruneExpired().then(() => {}, (error: unknown) => { this.logFailure(error) })
        .finally(() => {
          this.running = undefined
          this.schedule(Math.min(PRUNE_EVERY_MS, Math.max(1000, Math.floor(this.retentionMs / 10))))
        })
    }, delayMs).unref()
  }

  private logFailure (error: unknown): void {
    const now = Date.now()
    if (now - this.lastFailureLogAt < 300_000) return
    this.lastFailureLogAt = now
    this.log.warn(`cannot prune expired changes (${(error as Error).message}); retrying later`)
  }
}
