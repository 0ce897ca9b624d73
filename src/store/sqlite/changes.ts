import type { SqliteDatabase, Statement } from './driver.js'
import { asUnavailable } from './transient-errors.js'
import type { SqliteWriter } from './writer.js'
import {
  changeOfRow, CODE_OF_TYPE, type ChangeSignal, type ChangeFeedJsonPage, type ChangeFeedRequest, type ChangeLog, type ChangeRow, type HistoryRequest
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
  // One statement per filter shape and form, prepared when first used: the type codes are written into its text.
  const statements = new Map<string, Statement<[PageParameters], unknown>>()
  const prepared = (key: string, sql: () => string) => {
    let statement = statements.get(key)
    if (statement === undefined) {
      statement = db.prepare<[PageParameters], unknown>(sql())
      statements.set(key, statement)
    }
    return statement
  }
  /** The page's rows, `columns` of each, in seq order. */
  const pageSql = (columns: string, tagged: boolean, codes: readonly number[] | undefined) => {
    const ofTypes = codes === undefined ? '' : ` AND type IN (${codes.join(', ')})`
    // A tag's changes, those that left it included, from the two partial indexes.
    return tagged
      ? `SELECT ${columns} FROM plant_changes WHERE seq IN (
           SELECT seq FROM (SELECT seq FROM plant_changes WHERE tag = :tag AND seq > :after${ofTypes} ORDER BY seq LIMIT :limit)
           UNION ALL
           SELECT seq FROM (SELECT seq FROM plant_changes WHERE left_tag = :tag AND seq > :after${ofTypes} ORDER BY seq LIMIT :limit)
         ) ORDER BY seq LIMIT :limit`
      : `SELECT ${columns} FROM plant_changes WHERE seq > :after${ofTypes} ORDER BY seq LIMIT :limit`
  }
  const shapeOf = ({ after, limit, tag, types }: ChangeFeedRequest) => ({
    tagged: tag !== undefined,
    codes: types === undefined ? undefined : [...new Set(types.map((type) => CODE_OF_TYPE[type]))].sort(),
    parameters: tag === undefined ? { after, limit } : { tag, after, limit }
  })
  /** Whether a page's resume point is expired: its next change pruned, or committed before `keptSince`. */
  const isExpired = (request: ChangeFeedRequest, prunedThrough: bigint, firstAt: bigint | null | undefined) =>
    request.after < prunedThrough || (firstAt !== null && firstAt !== undefined && Number(firstAt) < request.keptSince)
  const newestOfPlant = db.prepare<[bigint, number], ChangeRow>(
    `SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE plant_id = ? ORDER BY seq DESC LIMIT ?`)
  const olderOfPlant = db.prepare<[bigint, bigint, number], ChangeRow>(
    `SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE plant_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`)

  const read = <Page>(work: () => Page): Promise<Page> => {
    try {
      return Promise.resolve(work())
    } catch (error) {
      return Promise.reject(asUnavailable(error))
    }
  }

  /** The page's changes as values; undefined when it is expired. One read transaction, so one snapshot. */
  const pageRows = (request: ChangeFeedRequest): ChangeRow[] | undefined => db.transaction(() => {
    const extent = extentRow.get() as { pruned_through: bigint }
    const first = firstAfter.get(request.after)
    if (isExpired(request, extent.pruned_through, first?.at)) return undefined
    if (first === undefined) return []
    const { tagged, codes, parameters } = shapeOf(request)
    return prepared(`rows|${tagged}|${codes?.join(',') ?? ''}`, () => pageSql(CHANGE_COLUMNS, tagged, codes)).all(parameters) as ChangeRow[]
  })()

  /**
   * The page as the feed answers it, with what tells whether it is expired, in one statement and so one
   * snapshot: the documents SQLite keeps in each row, joined as a list page's are.
   */
  const jsonPage = (request: ChangeFeedRequest): ChangeFeedJsonPage => {
    const { tagged, codes, parameters } = shapeOf(request)
    const statement = prepared(`json|${tagged}|${codes?.join(',') ?? ''}`, () => `
      SELECT (SELECT pruned_through FROM change_log WHERE singleton = 1) AS pruned,
             (SELECT committed_at FROM plant_changes WHERE seq > :after ORDER BY seq LIMIT 1) AS first_at,
             '[' || coalesce(group_concat(document, ',' ORDER BY seq), '') || ']' AS json,
             max(seq) AS last_seq
      FROM (${pageSql('seq, document', tagged, codes)})`)
    const row = statement.get(parameters) as { pruned: bigint, first_at: bigint | null, json: string, last_seq: bigint | null }
    if (isExpired(request, row.pruned, row.first_at)) return { status: 'expired' }
    return { status: 'page', json: row.json, lastSeq: row.last_seq ?? undefined }
  }

  return {
    async head () {
      return (extentRow.get() as { head: bigint }).head
    },
    read (request: ChangeFeedRequest) {
      return read(() => {
        const rows = pageRows(request)
        return rows === undefined ? { status: 'expired' } : { status: 'page', changes: rows.map(changeOfRow) }
      })
    },
    readJson (request: ChangeFeedRequest) {
      return read(() => jsonPage(request))
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
