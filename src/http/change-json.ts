import { jsonString } from '../json-text.js'
import type { ChangeRecord } from '../store/change-log.js'
import { plantJson } from '../store/plant-document.js'

/** A change as the feed and the stream show it, one line of JSON: `{"seq":…,"type":…,"id":…,"plant":…,"at":…}`, ids exact. */
export function changeJson (change: ChangeRecord): string {
  const plant = change.plant === undefined ? '' : `,"plant":${plantJson(change.id, change.plant.name, change.plant.tag)}`
  return `{"seq":${change.seq},"type":"${change.type}","id":${change.id}${plant},"at":"${new Date(change.at).toISOString()}"}`
}

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
