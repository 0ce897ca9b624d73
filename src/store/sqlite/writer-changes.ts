import type { SqliteDatabase } from './driver.js'
import { changeTypeCode, leftTagOf, type PendingChange } from '../change-log.js'

/**
 * The writer thread's half of the change log: each transaction numbers its changes after the head it
 * reads as it starts (the writer holds the database's write lock, so no other transaction, of this
 * process or another, numbers changes meanwhile) and moves the head once at its end.
 */
export interface ChangeRecorder {
  /** Called first in every write transaction. */
  readonly begin: () => void
  readonly record: (change: PendingChange) => void
  /** Called last in every write transaction. */
  readonly finish: () => void
}

export function changeRecorder (db: SqliteDatabase): ChangeRecorder {
  const readHead = db.prepare<[], { head: bigint, committed_at: bigint }>('SELECT head, committed_at FROM change_log WHERE singleton = 1').safeIntegers(true)
  const moveHead = db.prepare<[bigint, number]>('UPDATE change_log SET head = ?, committed_at = ? WHERE singleton = 1')
  const insert = db.prepare<[bigint, bigint, number, string | null, string | null, string | null, number, string]>(
    'INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
  let startHead = 0n
  let head = 0n
  let at = 0
  return {
    begin () {
      const last = readHead.get() as { head: bigint, committed_at: bigint }
      startHead = head = last.head
      // Never before the last commit's time, whatever the clock did: `at` grows with `seq`.
      at = Math.max(Date.now(), Number(last.committed_at))
    },
    record (change) {
      const { after } = change
      insert.run(++head, change.id, changeTypeCode(change), after?.name ?? null, after?.tag ?? null, leftTagOf(change), at, change.by)
    },
    finish () {
      if (head !== startHead) moveHead.run(head, at)
    }
  }
}

/**
 * Deletes up to `limit` of the oldest changes committed before `before` and moves `pruned_through` past
 * them; how many it deleted. Its own short transaction, so writes wait for one chunk at most.
 */
export function changePruning (db: SqliteDatabase): (argument: { readonly before: number, readonly limit: number }) => number {
  const oldest = db.prepare<[number], { seq: bigint, committed_at: bigint }>(
    'SELECT seq, committed_at FROM plant_changes ORDER BY seq LIMIT ?').safeIntegers(true)
  const remove = db.prepare<[bigint]>('DELETE FROM plant_changes WHERE seq <= ?')
  const movePruned = db.prepare<[bigint]>('UPDATE change_log SET pruned_through = max(pruned_through, ?) WHERE singleton = 1')
  const prune = db.transaction(({ before, limit }: { readonly before: number, readonly limit: number }) => {
    // The oldest changes up to the first one still kept: a change is never pruned before its time.
    let through: bigint | undefined
    for (const change of oldest.iterate(limit)) {
      if (Number(change.committed_at) >= before) break
      through = change.seq
    }
    if (through === undefined) return 0
    const deleted = remove.run(through).changes
    movePruned.run(through)
    return deleted
  })
  return (argument) => prune.immediate(argument)
}
