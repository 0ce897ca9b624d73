import type { SqliteDatabase, Statement } from './driver.js'
import { asUnavailable } from './transient-errors.js'
import type { SqliteWriter } from './writer.js'
import {
  changeOfRow, CODE_OF_TYPE, type ChangeSignal, type ChangeFeedPage, type ChangeFeedRequest, type ChangeLog, type ChangeRow, type HistoryRequest
} from '../change-log.js'

interface PageParameters { readonly tag?: string, readonly after: bigint, readonly limit: number }

const CHANGE_COLUMNS = 'seq, plant_id, type, name, tag, left_tag, committed_at AS at, made_by AS by'

/**
 * The change log's reads, on this thread's connection (a snapshot of the WAL: the writer numbers
 * changes in commit order, so a read never sees a later change without the earlier ones); pruning runs
 * on the writer thread (writer-changes.ts). `committed` tells of this process's write batches.
 */
export function sqliteChangeLog (db: SqliteDatabase, writer: SqliteWriter, committed: ChangeSignal): ChangeLog {
  const extentRow = db.prepare<[], { head: bigint, pruned_through: bigint }>('SELECT head, pruned_through FROM change_log WHERE singleton = 1')
  const firstAfter = db.prepare<[bigint], { seq: bigint, at: bigint }>(
    'SELECT seq, committed_at AS at FROM plant_changes WHERE seq > ? ORDER BY seq LIMIT 1')
  // One statement per filter shape, prepared when first used: the type codes are written into its text.
  const statements = new Map<string, Statement<[PageParameters], ChangeRow>>()
  const pageStatement = (tagged: boolean, codes: readonly number[] | undefined) => {
    const key = `${tagged}:${codes?.join(',') ?? ''}`
    let statement = statements.get(key)
    if (statement === undefined) {
      const ofTypes = codes === undefined ? '' : ` AND type IN (${codes.join(', ')})`
      // A tag's changes, those that left it included, from the two partial indexes.
      statement = db.prepare<[PageParameters], ChangeRow>(tagged
        ? `SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE seq IN (
             SELECT seq FROM (SELECT seq FROM plant_changes WHERE tag = :tag AND seq > :after${ofTypes} ORDER BY seq LIMIT :limit)
             UNION ALL
             SELECT seq FROM (SELECT seq FROM plant_changes WHERE left_tag = :tag AND seq > :after${ofTypes} ORDER BY seq LIMIT :limit)
           ) ORDER BY seq LIMIT :limit`
        : `SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE seq > :after${ofTypes} ORDER BY seq LIMIT :limit`)
      statements.set(key, statement)
    }
    return statement
  }
  const newestOfPlant = db.prepare<[bigint, number], ChangeRow>(
    `SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE plant_id = ? ORDER BY seq DESC LIMIT ?`)
  const olderOfPlant = db.prepare<[bigint, bigint, number], ChangeRow>(
    `SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE plant_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`)

  const read = (work: () => ReturnType<ChangeLog['read']> extends Promise<infer Page> ? Page : never) => {
    try {
      return Promise.resolve(work())
    } catch (error) {
      return Promise.reject(asUnavailable(error))
    }
  }

  return {
    async head () {
      return (extentRow.get() as { head: bigint }).head
    },
    read (request: ChangeFeedRequest) {
      // One read transaction, so the pruned mark, the first change and the page are one snapshot.
      return read(db.transaction((): ChangeFeedPage => {
        const { after, limit, tag, types } = request
        const extent = extentRow.get() as { pruned_through: bigint }
        if (after < extent.pruned_through) return { status: 'expired' }
        const first = firstAfter.get(after)
        if (first !== undefined && Number(first.at) < request.keptSince) return { status: 'expired' }
        if (first === undefined) return { status: 'page', changes: [] }
        const codes = types === undefined ? undefined : [...new Set(types.map((type) => CODE_OF_TYPE[type]))].sort()
        const rows = pageStatement(tag !== undefined, codes).all(tag === undefined ? { after, limit } : { tag, after, limit })
        return { status: 'page', changes: rows.map(changeOfRow) }
      }))
    },
    async history ({ id, before, limit }: HistoryRequest) {
      const rows = before === undefined ? newestOfPlant.all(id, limit) : olderOfPlant.all(id, before, limit)
      return rows.map(changeOfRow)
    },
    async prune (before, limit) {
      try {
        return await writer.pruneChanges(before, limit)
      } catch (error) {
        throw asUnavailable(error)
      }
    },
    watch: (listener) => committed.add(listener),
    async extent () {
      const { head, pruned_through: pruned } = extentRow.get() as { head: bigint, pruned_through: bigint }
      return { head, kept: Number(head - pruned), oldestSeq: head > pruned ? pruned + 1n : undefined }
    }
  }
}
