import { Type, type Static } from '@sinclair/typebox'

export const Health = Type.Object({
  status: Type.Literal('ok')
}, { $id: 'Health', title: 'Health' })
export type Health = Static<typeof Health>
