import { jsonString } from '../json-text.js'
import { changeJson } from '../store/change-document.js'
import type { ChangeRecord } from '../store/change-log.js'

/** A change of a plant's history: the change and who made it. */
export function historyChangeJson (change: ChangeRecord): string {
  return `${changeJson(change).slice(0, -1)},"by":${jsonString(change.by)}}`
}

/** The change as one Server-Sent Event: its `seq` as the event's id, its type as the event's name. */
export function changeEvent (change: ChangeRecord): string {
  return `id: ${change.seq}\nevent: ${change.type}\ndata: ${changeJson(change)}\n\n`
}

/** Whether the change passes a feed's filters: a tag it had before or after, and its type. */
export function passesFilter (change: ChangeRecord, filter: ChangeFilter): boolean {
  if (filter.types !== undefined && !filter.types.includes(change.type)) return false
  return filter.tag === undefined || change.plant?.tag === filter.tag || change.leftTag === filter.tag
}

export interface ChangeFilter {
  readonly tag?: string | undefined
  readonly types?: readonly ChangeRecord['type'][] | undefined
}
