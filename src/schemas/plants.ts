import { Type, type Static } from '@sinclair/typebox'
import { Choice, component, Int64, IntegerText, PageCursor, PageLimit, PlantText, ref } from './kinds.js'

export const NAME_RULE = { minLength: 1, maxLength: 256 }
export const TAG_RULE = { minLength: 0, maxLength: 256 }

const plantFields = {
  name: PlantText(NAME_RULE, 'The name of the plant', 'Monstera deliciosa'),
  tag: Type.Optional(PlantText(TAG_RULE, 'Tag that specifies the type of the plant', 'tropical'))
}

/** The id member a PUT or PATCH body may repeat: only the path's own id, in any JSON integer spelling. */
const repeatedId = Type.Optional(Int64('The id of the plant; when present it must equal the id in the path'))

export const Plant = Type.Object(plantFields, component('Plant', 'A plant as the store returns it after a create: its name, and its tag when one was given.'))
export type Plant = Static<typeof Plant>

export const NewPlant = Type.Object({
  id: Int64('Identification number of the plant'),
  ...plantFields
}, component('NewPlant', 'A plant to create. Unknown properties are accepted and ignored.'))
export type NewPlant = Static<typeof NewPlant>

export const StoredPlant = Type.Object({
  id: Int64('Identification number of the plant'),
  ...plantFields
}, component('StoredPlant', 'A plant as the store holds it: id, name, and tag when one was given.'))
export type StoredPlant = Static<typeof StoredPlant>

export const PlantReplacement = Type.Object({
  id: repeatedId,
  ...plantFields
}, component('PlantReplacement', 'The whole new state of a plant: a `Plant`. A tag absent from it is absent afterwards. Unknown ' +
    'properties are accepted and ignored.', { examples: [{ name: 'Monstera deliciosa', tag: 'tropical' }] }))
export type PlantReplacement = Static<typeof PlantReplacement>

/** A tag a patch may also remove: the tag rules, or `null`. */
const RemovableTag = Type.Unsafe<string | null>({
  ...PlantText(TAG_RULE, 'A new tag for the plant, or `null` to remove its tag', 'tropical'),
  type: ['string', 'null']
})

export const PlantPatch = Type.Object({
  id: repeatedId,
  name: Type.Optional(PlantText(NAME_RULE, 'A new name for the plant; it cannot be removed', 'Monstera deliciosa')),
  tag: Type.Optional(RemovableTag)
}, component('PlantPatch', 'A JSON merge patch (RFC 7396) of a plant: members that are present change the plant, absent ones ' +
    'leave it as it is, `"tag": null` removes the tag. Unknown properties are accepted and ignored.', { examples: [{ name: 'Swiss cheese plant' }, { tag: null }] }))
export type PlantPatch = Static<typeof PlantPatch>

export const StoredPlantPage = Type.Array(ref(StoredPlant), {
  description: 'Plants ordered by id ascending. A `Link: <…>; rel="next"` header names the next page while more plants remain.'
})

export const PlantIdParams = Type.Object({
  id: IntegerText({ format: 'int64', description: 'The id of the plant, in canonical decimal form', examples: [10] })
})
export type PlantIdParams = Static<typeof PlantIdParams>

export const PLANT_ORDERS = ['id', '-id', 'name', '-name'] as const
export const SEARCH_RULE = { minLength: 1, maxLength: 100 }
/** A cursor holds a name of up to 256 characters, each at most 12 in JSON escapes, in base64url, and its digest. */
export const CURSOR_MAX_LENGTH = 4200

export const PlantListQuery = Type.Object({
  limit: PageLimit('plants'),
  sort: Type.Optional(Choice(PLANT_ORDERS, 'The order of the plants: `id` (the default) or `name` ascending, `-id` or `-name` ' +
    'descending. Names are ordered by their Unicode code points, ties by id (`-name`: exactly the reverse).', 'name')),
  after: PageCursor('with `sort=id` (the default) the page starts with the first plant whose id is greater (it need not ' +
    'exist); with `sort=-id`, with the greatest id below it. Not with a name order, which continues with `cursor`', 10),
  cursor: Type.Optional(Type.String({
    minLength: 1,
    maxLength: CURSOR_MAX_LENGTH,
    description: 'Where a `sort=name` or `sort=-name` listing continues: opaque, taken only from a `Link` header, and valid only ' +
      'with the same `sort`, `q` and `tag`',
    examples: ['WyJGZXJuIiwiMTAiXQ.7l3s0c5kq0F2m1hV']
  })),
  tag: Type.Optional(PlantText(TAG_RULE, 'Only plants whose tag is exactly this (empty: the empty tag; plants ' +
    'without a tag never match)', 'tropical')),
  q: Type.Optional(PlantText(SEARCH_RULE, 'Only plants whose name contains this text, both folded ' +
    '(`s.normalize("NFC").toUpperCase().toLowerCase()`: `strasse` finds `Straße`, `é` finds `É`); `%`, `_`, `*` and `\\` ' +
    'are ordinary characters', 'fern'))
})
export type PlantListQuery = Static<typeof PlantListQuery>
