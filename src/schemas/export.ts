import { Type, type Static } from '@sinclair/typebox'
import { TAG_RULE } from './plants.js'
import { PlantText } from './kinds.js'

export const NDJSON_MEDIA_TYPE = 'application/x-ndjson'

export const ExportQuery = Type.Object({
  tag: Type.Optional(PlantText(TAG_RULE, 'Only plants whose tag is exactly this (empty: the empty tag; plants ' +
    'without a tag never match)', 'tropical'))
})
export type ExportQuery = Static<typeof ExportQuery>
