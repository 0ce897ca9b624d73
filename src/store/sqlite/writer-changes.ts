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
  const readHead = db.prepare<[], bigint>('SELECT head FROM change_log WHERE singleton = 1').pluck().safeIntegers(true)
  const moveHead = db.prepare<[bigint]>('UPDATE change_log SET head = ? WHERE singleton = 1')
  const insert = db.prepare<[bigint, bigint, number, string | null, string | null, string | null, number, string]>(
    'INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
  let startHead = 0n
  let head = 0n
  let at = 0
  return {
    begin () {
      startHead = head = readHead.get() as bigint
      at = Date.now()
    },
    record (change) {
      const { after } = change
      insert.run(++head, change.id, changeTypeCode(change), after?.name ?? null, after?.tag ?? null, leftTagOf(change), at, change.by)
    },
    finish () {
      if (head !== startHead) moveHead.run(head)
    }
  }
}

/**
 * Deletes up to `limit` of the oldest changes committed before `before` and moves `pruned_through` past
 * them; how many it deleted. Its own short transaction, so writes wait for one chunk at most.
 */
export function changePruning (db: SqliteDatabase): (argument: { readonly before: number, readonly limit: number }) => number {
  const lastExpired = db.prepare<[number, number], bigint | null>(`
    SELECT max(seq) FROM (SELECT seq, committed_at FROM plant_changes ORDER BY seq LIMIT ?) WHERE committed_at < ?`).pluck().safeIntegers(true)
  const remove = db.prepare<[bigint]>('DELETE FROM plant_changes WHERE seq <= ?')
  const movePruned = db.prepare<[bigint]>('UPDATE change_log SET pruned_through = max(pruned_through, ?) WHERE singleton = 1')
  const prune = db.transaction(({ before, limit }: { readonly before: number, readonly limit: number }) => {
    const through = lastExpired.get(limit, before)
    if (through === null || through === undefined) return 0
    const deleted = remove.run(through).changes
    movePruned.run(through)
    return deleted
  })
  return (argument) => prune.immediate(argument)
}
