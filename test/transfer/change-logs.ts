import { openStore } from '../../src/store/open-store.js'
import type { ChangeFeedPage, ChangeLogExtent, ChangeRecord } from '../../src/store/change-log.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { openSqliteDatabase } from '../../src/store/sqlite/connection.js'
import { TEST_POSTGRES_OPTIONS } from '../helpers/app.js'

export const INT64_MAX = 9223372036854775807n
export const INT64_MIN = -9223372036854775808n
/** The plants `writeHistory` changes, and one it never does. */
export const HISTORY_IDS: readonly bigint[] = [1n, INT64_MAX, INT64_MIN, 9007199254740993n, 5n, 404n]
/** A first `seq` past 2^53, where a number would lose it. */
export const FIRST_SEQ = 9007199254740993n

/**
 * A store's change log as every reader of the port sees it, for the tests that move a store (copy,
 * backup, restore) to compare a source with its copy exactly.
 */
export interface ChangeLogView {
  readonly head: bigint
  readonly extent: ChangeLogExtent
  /** What a reader resuming at each of these points is answered (an expired one included). */
  readonly resumed: ReadonlyArray<readonly [after: bigint, page: ChangeFeedPage]>
  /** The kept log, read a page at a time from the oldest kept change: each page as it was answered. */
  readonly pages: readonly ChangeFeedPage[]
  /** The kept changes of plants that had the tag `shade`, before or after. */
  readonly shade: readonly ChangeRecord[]
  /** Each plant's history, newest first, read two at a time. */
  readonly histories: ReadonlyArray<readonly [id: bigint, changes: readonly ChangeRecord[]]>
}

/** The view of a store's log: its pages of `pageSize` changes, and the histories of `ids`. */
export async function changeLogView (store: PlantStore, ids: readonly bigint[], pageSize = 3): Promise<ChangeLogView> {
  const { changes } = store
  const extent = await changes.extent()
  const head = await changes.head()
  const start = extent.oldestSeq === undefined ? head : extent.oldestSeq - 1n
  const read = (after: bigint, limit: number, tag?: string) => changes.read({ after, limit, tag, keptSince: 0 })
  const resumed: Array<[bigint, ChangeFeedPage]> = []
  for (const after of new Set([0n, start > 0n ? start - 1n : 0n, start, head])) resumed.push([after, await read(after, 1000)])
  const pages: ChangeFeedPage[] = []
  for (let after = start; ;) {
    const page = await read(after, pageSize)
    pages.push(page)
    const last = page.status === 'page' ? page.changes.at(-1) : undefined
    if (last === undefined) break
    after = last.seq
  }
  const shade = await read(start, 1000, 'shade')
  const histories: Array<[bigint, ChangeRecord[]]> = []
  for (const id of ids) {
    const history: ChangeRecord[] = []
    for (let before: bigint | undefined; ;) {
      const older = await changes.history({ id, before, limit: 2 })
      history.push(...older)
      if (older.length < 2) break
      before = older.at(-1)?.seq
    }
    histories.push([id, history])
  }
  return { head, extent, resumed, pages, shade: shade.status === 'page' ? shade.changes : [], histories }
}

/** The view of the store a `DATABASE_URL` names, opened and closed for it. */
export async function changeLogAt (databaseUrl: string, ids: readonly bigint[], pageSize?: number): Promise<ChangeLogView> {
  return withStore(databaseUrl, (store) => changeLogView(store, ids, pageSize))
}

export async function withStore<T> (databaseUrl: string, work: (store: PlantStore) => Promise<T>): Promise<T> {
  const store = await openStore(databaseUrl, TEST_POSTGRES_OPTIONS)
  try {
    return await work(store)
  } finally {
    await store.close()
  }
}

/**
 * Writes every kind of change through the store's own writes, by several writers, then prunes the first
 * three: 9 changes numbered, 6 kept. Plants 1 (`shade` then `sun`) and 9007199254740993 and 5 are left.
 */
export async function writeHistory (store: PlantStore): Promise<void> {
  await store.create({ id: 1n, name: 'Fern', tag: 'shade' }, 'jwt:alice')
  await store.create({ id: INT64_MAX, name: 'Ivy' }, 'cli')
  await store.create({ id: INT64_MIN, name: 'Moss', tag: 'sun' }, 'ops')
  const cutoff = Date.now() + 1
  await new Promise((resolve) => setTimeout(resolve, 5))
  await store.put({ id: 1n, name: 'Fern', tag: 'sun' }, undefined, 'jwt:bob')
  await store.patch(INT64_MAX, { tag: 'shade' }, undefined, 'jwt:alice')
  await store.create({ id: 9007199254740993n, name: 'Monstera "ça pousse" 🌿', tag: '' }, 'jwt:alice')
  await store.delete(INT64_MIN, undefined, 'ops')
  const ivy = { id: INT64_MAX, name: 'Ivy', tag: 'shade' }
  const planned = await store.writePlan({
    expected: new Map([[5n, undefined], [INT64_MAX, ivy]]),
    changes: [{ id: 5n, before: undefined, after: { id: 5n, name: 'Rose', tag: 'shade' } }, { id: INT64_MAX, before: ivy, after: undefined }]
  }, 'batcher')
  if (planned.status !== 'written') throw new Error('the plan was not written')
  const pruned = await store.changes.prune(cutoff, 1000)
  if (pruned !== 3) throw new Error(`pruned ${pruned} changes, not 3`)
}

/** The change of `id` a store recorded last. */
export async function lastChangeOf (store: PlantStore, id: bigint): Promise<ChangeRecord | undefined> {
  return (await store.changes.history({ id, limit: 1 }))[0]
}

/**
 * Starts the change log of a SQLite store (made if need be) after `FIRST_SEQ` - 1, as if that many
 * changes had been made and pruned: every `seq` it numbers next is beyond a double's exact integers.
 */
export function startLogPastDoubles (file: string): void {
  const db = openSqliteDatabase(file)
  try {
    db.prepare('UPDATE change_log SET head = ?, pruned_through = ? WHERE singleton = 1').run(FIRST_SEQ - 1n, FIRST_SEQ - 1n)
  } finally {
    db.close()
  }
}

/**
 * Adds `count` changes to the log of a SQLite store with plain SQL, quickly, numbered after its head:
 * every type, ids at both ends of int64, names with non-ASCII text, tags absent, empty, set or left, and
 * several writers. The plants table is left as it is (the copy moves the log, not a fold of it).
 */
export function addChanges (file: string, count: number): void {
  const db = openSqliteDatabase(file)
  try {
    db.transaction(() => {
      const head = db.prepare('SELECT head FROM change_log WHERE singleton = 1').pluck().get() as bigint
      db.prepare(`
        WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
        INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by)
        SELECT :head + i,
               CASE i % 7 WHEN 0 THEN 9223372036854775807 - i WHEN 1 THEN -9223372036854775807 + i ELSE i END,
               1 + i % 3,
               CASE WHEN i % 3 = 2 THEN NULL ELSE 'plant ' || i || ' ça pousse 🌿' END,
               CASE WHEN i % 3 = 2 THEN NULL WHEN i % 4 = 0 THEN NULL WHEN i % 4 = 1 THEN '' ELSE 'tag ' || (i % 5) END,
               CASE WHEN i % 6 = 0 THEN 'shade' END,
               1764000000000 + i,
               CASE i % 2 WHEN 0 THEN 'cli' ELSE 'jwt:user-' || (i % 13) END
        FROM n`).run({ count, head })
      db.prepare('UPDATE change_log SET head = head + ? WHERE singleton = 1').run(count)
    })()
  } finally {
    db.close()
  }
}
