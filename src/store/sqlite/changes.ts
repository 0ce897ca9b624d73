import type { SqliteDatabase, Statement } from './driver.js'
import { asUnavailable } from './transient-errors.js'
import { CHANGE_DOCUMENT_SQL, withCommitTime } from './change-document-sql.js'
import type { ChangeFeedJsonPage } from '../change-document.js'
import type { SqliteWriter } from './writer.js'
import {
  changeOfRow, CODE_OF_TYPE, type ChangeSignal, type ChangeFeedRequest, type ChangeLog, type ChangeRow, type HistoryRequest
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
  // The rows as values (`ChangeRow`), or as the feed's documents (`seq` and `document`).
  const statements = new Map<string, Statement<[PageParameters], unknown>>()
  const pageStatement = (columns: string, tagged: boolean, codes: readonly number[] | undefined, raw: boolean) => {
    const key = `${columns}|${tagged}|${codes?.join(',') ?? ''}`
    let statement = statements.get(key)
    if (statement === undefined) {
      const ofTypes = codes === undefined ? '' : ` AND type IN (${codes.join(', ')})`
      // A tag's changes, those that left it included, from the two partial indexes.
      statement = db.prepare<[PageParameters], unknown>(tagged
        ? `SELECT ${columns} FROM plant_changes WHERE seq IN (
             SELECT seq FROM (SELECT seq FROM plant_changes WHERE tag = :tag AND seq > :after${ofTypes} ORDER BY seq LIMIT :limit)
             UNION ALL
             SELECT seq FROM (SELECT seq FROM plant_changes WHERE left_tag = :tag AND seq > :after${ofTypes} ORDER BY seq LIMIT :limit)
           ) ORDER BY seq LIMIT :limit`
        : `SELECT ${columns} FROM plant_changes WHERE seq > :after${ofTypes} ORDER BY seq LIMIT :limit`)
      if (raw) statement.raw(true)
      statements.set(key, statement)
    }
    return statement
  }
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

  /**
   * The page's rows, `columns` of each; undefined when it is expired. One read transaction, so the pruned
   * mark, the first change and the page are one snapshot.
   */
  const pageRows = <Row>(columns: string, request: ChangeFeedRequest, raw = false): Row[] | undefined => db.transaction(() => {
    const { after, limit, tag, types } = request
    const extent = extentRow.get() as { pruned_through: bigint }
    if (after < extent.pruned_through) return undefined
    const first = firstAfter.get(after)
    if (first !== undefined && Number(first.at) < request.keptSince) return undefined
    if (first === undefined) return []
    const codes = types === undefined ? undefined : [...new Set(types.map((type) => CODE_OF_TYPE[type]))].sort()
    return pageStatement(columns, tag !== undefined, codes, raw).all(tag === undefined ? { after, limit } : { tag, after, limit }) as Row[]
  })()

  return {
    async head () {
      return (extentRow.get() as { head: bigint }).head
    },
    read (request: ChangeFeedRequest) {
      return read(() => {
        const rows = pageRows<ChangeRow>(CHANGE_COLUMNS, request)
        return rows === undefined ? { status: 'expired' } : { status: 'page', changes: rows.map(changeOfRow) }
      })
    },
    readJson (request: ChangeFeedRequest) {
      // Documents built by SQLite: a page costs about a third of reading its rows as values and writing them.
      return read((): ChangeFeedJsonPage => {
        const rows = pageRows<[seq: bigint, document: string, at: bigint]>(`seq, ${CHANGE_DOCUMENT_SQL}, committed_at`, request, true)
        if (rows === undefined) return { status: 'expired' }
        return { status: 'page', json: `[${rows.map(([, document, at]) => withCommitTime(document, at)).join(',')}]`, lastSeq: rows.at(-1)?.[0] }
      })
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
