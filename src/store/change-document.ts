/**
 * A change's JSON document, `{"seq":…,"type":…,"id":…,"plant":…,"at":…}`: keys in that order, no `plant`
 * for a deletion, ids and `seq` exact, `at` RFC 3339 UTC with milliseconds. This is the one place
 * TypeScript writes it (feed pages, stream events, histories); SQLite builds the same bytes in SQL
 * (sqlite/change-document-sql.ts), and the feed's tests hold every backend to the same text.
 */
import type { ChangeFeedPage, ChangeRecord } from './change-log.js'
import { plantJson } from './plant-document.js'

export function changeJson (change: ChangeRecord): string {
  const plant = change.plant === undefined ? '' : `,"plant":${plantJson(change.id, change.plant.name, change.plant.tag)}`
  return `{"seq":${change.seq},"type":"${change.type}","id":${change.id}${plant},"at":"${new Date(change.at).toISOString()}"}`
}

/** A page of the feed as the route answers it: a JSON array of change documents, and the page's last `seq`. */
export type ChangeFeedJsonPage =
  | { readonly status: 'page', readonly json: string, readonly lastSeq: bigint | undefined }
  | { readonly status: 'expired' }

/** The JSON page of a page of change records (the memory and PostgreSQL adapters build it so). */
export function jsonPageOf (page: ChangeFeedPage): ChangeFeedJsonPage {
  if (page.status === 'expired') return page
  return { status: 'page', json: `[${page.changes.map(changeJson).join(',')}]`, lastSeq: page.changes.at(-1)?.seq }
}
