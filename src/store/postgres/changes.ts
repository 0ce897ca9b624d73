import type { PostgresConnection } from './connection.js'
import { changeOfRow, CODE_OF_TYPE, type ChangeLog, type ChangeRow } from '../change-log.js'
import { ChangePageQuery } from './change-page-query.js'

const CHANGE_COLUMNS = 'seq, plant_id, type, name, tag, left_tag, committed_at AS at, made_by AS by'
const OF_TYPES = '($3::smallint[] IS NULL OR type = ANY($3::smallint[]))'

/**
 * A page of the feed with what tells whether it is expired, in one statement and so one snapshot: the
 * seq pruning has reached, and when the first change after `after` was committed. Changes are numbered in
 * commit order (write-batch.ts), so a snapshot that holds a change holds every change before it.
 */
const pageText = (changes: string) => `
  SELECT m.pruned, m.first_at, c.* FROM
    (SELECT (SELECT through FROM change_log_pruned WHERE singleton = 1) AS pruned,
            (SELECT committed_at FROM plant_changes WHERE seq > $1 ORDER BY seq LIMIT 1) AS first_at) m
    LEFT JOIN LATERAL (${changes}) c ON true
  ORDER BY c.seq`
// A tag's changes, those that left it included, each half in order from its partial index.
const tagPage = (columns: string) => `
  SELECT ${columns} FROM plant_changes WHERE seq IN (
    (SELECT seq FROM plant_changes WHERE tag = $4 AND seq > $1 AND ${OF_TYPES} ORDER BY seq LIMIT $2)
    UNION ALL
    (SELECT seq FROM plant_changes WHERE left_tag = $4 AND seq > $1 AND ${OF_TYPES} ORDER BY seq LIMIT $2))
  ORDER BY seq LIMIT $2`
const READ_PAGE = {
  name: 'plantstore-read-changes',
  text: pageText(`SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE seq > $1 AND ${OF_TYPES} ORDER BY seq LIMIT $2`)
}
const READ_TAG_PAGE = { name: 'plantstore-read-tag-changes', text: pageText(tagPage(CHANGE_COLUMNS)) }
// The same pages for the feed's answer (change-page-query.ts): the fields it needs, in its order, as text.
const DOCUMENT_COLUMNS = 'seq, type, plant_id, name, tag, committed_at'
const READ_DOCUMENT_PAGE = {
  name: 'plantstore-read-change-documents',
  text: pageText(`SELECT ${DOCUMENT_COLUMNS} FROM plant_changes WHERE seq > $1 AND ${OF_TYPES} ORDER BY seq LIMIT $2`)
}
const READ_TAG_DOCUMENT_PAGE = {
  name: 'plantstore-read-tag-change-documents',
  text: pageText(tagPage(DOCUMENT_COLUMNS))
}
const HISTORY = {
  name: 'plantstore-plant-history',
  text: `SELECT ${CHANGE_COLUMNS} FROM plant_changes WHERE plant_id = $1 AND ($2::bigint IS NULL OR seq < $2) ORDER BY seq DESC LIMIT $3`
}
const EXTENT = {
  name: 'plantstore-change-log-extent',
  text: 'SELECT (SELECT head FROM change_log_head WHERE singleton = 1) AS head, (SELECT through FROM change_log_pruned WHERE singleton = 1) AS pruned'
}
/**
 * One chunk of pruning: of the oldest `$2` changes, those before the first one committed at `$1` or
 * later. It never touches the head's row, so writers do not wait for it.
 */
const PRUNE = {
  name: 'plantstore-prune-changes',
  text: `
    WITH oldest AS (SELECT seq, committed_at FROM plant_changes ORDER BY seq LIMIT $2),
         expired AS (
           SELECT max(seq) AS through FROM oldest
           WHERE seq < coalesce((SELECT min(seq) FROM oldest WHERE committed_at >= $1), 9223372036854775807)),
         deleted AS (DELETE FROM plant_changes WHERE seq <= (SELECT through FROM expired) RETURNING 1),
         moved AS (UPDATE change_log_pruned SET through = greatest(through, (SELECT through FROM expired))
                   WHERE singleton = 1 AND (SELECT through FROM expired) IS NOT NULL)
    SELECT count(*) AS deleted FROM deleted`
}

type PageRow = { pruned: bigint, first_at: bigint | null } & ({ [Column in keyof ChangeRow]: ChangeRow[Column] | null })

/** `watch` is the store's: its own commits, and the other instances' NOTIFYs where a connection can LISTEN. */
export function postgresChangeLog (connection: PostgresConnection, watch: ChangeLog['watch']): ChangeLog {
  const extent = async () => {
    const { rows } = await connection.query<{ head: bigint, pruned: bigint }>(EXTENT)
    return rows[0] as { head: bigint, pruned: bigint }
  }
  return {
    async head () {
      return (await extent()).head
    },
    async read ({ after, limit, tag, types, keptSince }) {
      const codes = types === undefined ? null : types.map((type) => CODE_OF_TYPE[type])
      const values = [after.toString(), limit, codes, ...(tag === undefined ? [] : [tag])]
      const { rows } = await connection.query<PageRow>({ ...(tag === undefined ? READ_PAGE : READ_TAG_PAGE), values })
      const first = rows[0] as PageRow
      if (after < first.pruned || (first.first_at !== null && Number(first.first_at) < keptSince)) return { status: 'expired' }
      return { status: 'page', changes: rows.filter((row) => row.seq !== null).map((row) => changeOfRow(row as ChangeRow)) }
    },
    async readJson ({ after, limit, tag, types, keptSince }) {
      const codes = types === undefined ? null : types.map((type) => CODE_OF_TYPE[type])
      const values = [after.toString(), limit, codes, ...(tag === undefined ? [] : [tag])]
      const query = new ChangePageQuery(tag === undefined ? READ_DOCUMENT_PAGE : READ_TAG_DOCUMENT_PAGE, values, limit)
      await connection.submit(query)
      return query.page(after, keptSince)
    },
    async history ({ id, before, limit }) {
      const { rows } = await connection.query<ChangeRow>({ ...HISTORY, values: [id.toString(), before?.toString() ?? null, limit] })
      return rows.map(changeOfRow)
    },
    async prune (before, limit) {
      const { rows } = await connection.query<{ deleted: bigint }>({ ...PRUNE, values: [before, limit] })
      return Number(rows[0]?.deleted ?? 0n)
    },
    watch,
    async extent () {
      const { head, pruned } = await extent()
      return { head, kept: Number(head - pruned), oldestSeq: head > pruned ? pruned + 1n : undefined }
    }
  }
}
