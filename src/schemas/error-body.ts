import { Type, type Static } from '@sinclair/typebox'
import { component } from './kinds.js'

export const ErrorBody = Type.Object({
  error: Type.Integer({ format: 'int32', description: 'The HTTP status code of the response', examples: [400] }),
  message: Type.String({ description: 'What went wrong, as a human sentence', examples: ['name must be at most 256 characters long'] })
}, component('Error', 'The body of every error response; `error` always equals the HTTP status.'))
export type ErrorBody = Static<typeof ErrorBody>
