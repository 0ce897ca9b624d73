/**
 * A change's JSON document, `{"seq":…,"type":…,"id":…,"plant":…,"at":…}`: keys in that order, no `plant`
 * for a deletion, ids and `seq` exact, `at` RFC 3339 UTC with milliseconds. This is the one place
 * TypeScript writes it (feed pages, stream events, histories); SQLite builds the same bytes in SQL as
 * it writes each change (`plant_changes.document`, migration 11), and the feed's tests hold every backend
 * to the same text.
 */
import type { ChangeFeedPage, ChangeRecord, ChangeType } from './change-log.js'
import { plantJson } from './plant-document.js'

export function changeJson (change: ChangeRecord): string {
  return changeJsonOfFields(change.seq, change.type, change.id, change.plant?.name ?? null, change.plant?.tag ?? null, change.at)
}

/** The same document of a change's fields, ids as exact decimals; `name` null for a deletion. */
export function changeJsonOfFields (
  seq: bigint | string, type: ChangeType, id: bigint | string, name: string | null, tag: string | null, at: number
): string {
  const plant = name === null ? '' : `,"plant":${plantJson(id, name, tag)}`
  return `{"seq":${seq},"type":"${type}","id":${id}${plant},"at":"${new Date(at).toISOString()}"}`
}

/** A page of the feed as the route answers it: a JSON array of change documents, and the page's last `seq`. */
export type ChangeFeedJsonPage =
  | { readonly status: 'page', readonly json: string, readonly lastSeq: bigint | undefined }
  | { readonly status: 'expired' }

/** The JSON page of a page of change records (the memory adapter builds it so). */
export function jsonPageOf (page: ChangeFeedPage): ChangeFeedJsonPage {
  if (page.status === 'expired') return page
  return { status: 'page', json: `[${page.changes.map(changeJson).join(',')}]`, lastSeq: page.changes.at(-1)?.seq }
}
