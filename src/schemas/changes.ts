import { Kind, Type, TypeRegistry, type Static } from '@sinclair/typebox'
import { Choice, component, Int64, IntegerText, PageLimit, PlantText, ref } from './kinds.js'
import { StoredPlant, TAG_RULE } from './plants.js'
import { CHANGE_TYPES } from '../store/change-log.js'

const Seq = (description: string) => Int64(description)

const changeFields = {
  seq: Seq('The change\'s number: unique, and growing in commit order (numbers may be skipped)'),
  type: Choice(CHANGE_TYPES, 'What the change did', 'plant.updated'),
  id: Int64('The id of the plant it changed'),
  plant: Type.Optional(ref(StoredPlant)),
  at: Type.String({ format: 'date-time', description: 'When the write committed, RFC 3339 UTC with milliseconds', examples: ['2026-11-27T17:00:00.123Z'] })
}

export const Change = Type.Object(changeFields, component('Change', 'A change of a plant: `plant` is the plant after it as ' +
  '`GET /plants/{id}` would show it, absent for `plant.deleted`.', {
  examples: [{ seq: 1042, type: 'plant.updated', id: 42, plant: { id: 42, name: 'Fern', tag: 'shade' }, at: '2026-11-27T17:00:00.123Z' }]
}))
export type Change = Static<typeof Change>

export const PlantHistoryChange = Type.Object({
  ...changeFields,
  by: Type.String({ description: 'Who made it: the name of the access token, `jwt:<sub>` for an identity provider\'s token, `cli` for a command', examples: ['ci-deploy'] })
}, component('PlantHistoryChange', 'A change in a plant\'s history: a `Change` and who made it.'))

export const ChangePage = Type.Array(ref(Change), { description: 'Changes after `after`, `seq` ascending' })
export const PlantHistoryPage = Type.Array(ref(PlantHistoryChange), { description: 'The plant\'s kept changes, newest first' })

export const ChangeHead = Type.Object({
  seq: Seq('The greatest `seq` ever committed (pruning never lowers it); 0 when none')
}, component('ChangeHead', 'Where the change feed is now: read the plants, then follow the changes after this `seq`.'))

/** `after` and `Last-Event-ID`: a canonical decimal integer from 0 to the int64 maximum. */
const SeqText = (description: string) => Type.Optional(IntegerText({ format: 'int64', minimum: 0, description, examples: [1042] }))

/** The `type` filter: a comma-separated subset of the three types, none twice. */
export function isChangeTypeList (value: unknown): value is string {
  if (typeof value !== 'string') return false
  const types = value.split(',')
  return new Set(types).size === types.length && types.every((type) => (CHANGE_TYPES as readonly string[]).includes(type))
}
TypeRegistry.Set('ChangeTypeList', (_schema, value) => isChangeTypeList(value))

export const ChangeFeedQuery = Type.Object({
  after: SeqText('The changes with a greater `seq` (default 0: from the oldest kept). A live stream starts at the head without it'),
  limit: PageLimit('changes'),
  tag: Type.Optional(PlantText(TAG_RULE, 'Only the changes of plants that had this tag before or after the change', 'shade')),
  type: Type.Optional(Type.Unsafe<string>({
    [Kind]: 'ChangeTypeList',
    type: 'string',
    description: 'Only these types: a comma-separated subset of `plant.created`, `plant.updated`, `plant.deleted`',
    examples: ['plant.created,plant.deleted']
  }))
})
export type ChangeFeedQuery = Static<typeof ChangeFeedQuery>

export const ChangeFeedHeaders = Type.Object({
  accept: Type.Optional(Type.String({ description: '`text/event-stream` for a live stream (Server-Sent Events) instead of a page' })),
  'last-event-id': SeqText('A reconnecting stream\'s last seen `seq`: the stream starts after it (it wins over `after`)')
})

export const HistoryQuery = Type.Object({
  after: SeqText('Continue with the changes older than this `seq` (from a `Link` header)'),
  limit: PageLimit('changes')
})
export type HistoryQuery = Static<typeof HistoryQuery>
