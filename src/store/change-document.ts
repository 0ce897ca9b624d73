/**
 * A change's JSON document, `{"seq":…,"type":…,"id":…,"plant":…,"at":…}`: keys in that order, no `plant`
 * for a deletion, ids and `seq` exact, `at` RFC 3339 UTC with milliseconds. This is the one place
 * TypeScript writes it (feed pages, stream events, histories); SQLite builds the same bytes in SQL as
 * it writes each change (`plant_changes.document`, migration 11), and the feed's tests hold every backend
 * to the same text.
 */
import type { ChangeFeedJsonPage, ChangeFeedPage, ChangeRecord, ChangeType } from './change-log.js'
import { plantJson } from './plant-document.js'

export function changeJson (change: ChangeRecord): string {
  return changeJsonOfFields(change.seq, change.type, change.id, change.plant?.name ?? null, change.plant?.tag ?? null, change.at)
}

/** The same document of a change's fields, ids as exact decimals; `name` null for a deletion. */
export function changeJsonOfFields (
  seq: bigint | string, type: ChangeType, id: bigint | string, name: string | null, tag: string | null, at: number
): string {
  const plant = name === null ? '' : `,"plant":${plantJson(id, name, tag)}`
  return `{"seq":${seq},"type":"${type}","id":${id}${plant},"at":"${isoTime(at)}"}`
}

const LAST_FOUR_DIGIT_YEAR_MS = 253402300799999
let cachedMinute = Number.NaN
let cachedMinutePrefix = ''

/**
 * `new Date(ms).toISOString()`, at a fifth of its cost for the times of a page of changes, which mostly
 * share their minute: the text up to the minute is kept from the last call.
 */
export function isoTime (ms: number): string {
  if (!(ms >= 0 && ms <= LAST_FOUR_DIGIT_YEAR_MS)) return new Date(ms).toISOString()
  const minute = Math.floor(ms / 60_000)
  if (minute !== cachedMinute) {
    cachedMinute = minute
    cachedMinutePrefix = new Date(minute * 60_000).toISOString().slice(0, 17)
  }
  const inMinute = ms - minute * 60_000
  const seconds = Math.floor(inMinute / 1000)
  const millis = inMinute - seconds * 1000
  return `${cachedMinutePrefix}${seconds < 10 ? '0' : ''}${seconds}.${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`
}

/** The JSON page of a page of change records (the memory adapter builds it so). */
export function jsonPageOf (page: ChangeFeedPage): ChangeFeedJsonPage {
  if (page.status === 'expired') return page
  return { status: 'page', json: `[${page.changes.map(changeJson).join(',')}]`, lastSeq: page.changes.at(-1)?.seq }
}
