import type { TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { FastifyInstance, FastifySchemaCompiler } from 'fastify'
import fp from 'fastify-plugin'
import { invalidRequest } from '../errors.js'
import { MALFORMED_PARAMETERS, type ParsedQuery } from './query-string.js'
import { sharedSchemas } from '../schemas/components.js'
import { describeViolation } from '../schemas/violations.js'

const HTTP_PART_LABEL: Record<string, string> = {
  body: 'request body',
  querystring: 'query parameter',
  params: 'path parameter',
  headers: 'header'
}

/**
 * Validation for every HTTP part, compiled from the TypeBox schemas with TypeBox's own compiler so the
 * custom `Int64` and `PlantText` kinds are checked. Nothing is coerced, in any part: a body's `"5"` is
 * not the integer 5, and path and query values are text checked by pattern (their handlers parse them).
 * Failures become a 400 whose message names the field and the rule it broke.
 */
export const validation = fp(async function validation (app: FastifyInstance) {
  app.setValidatorCompiler(compileValidator)
}, { name: 'validation' })

const compileValidator: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const check = TypeCompiler.Compile(schema, [...sharedSchemas])
  const part = HTTP_PART_LABEL[httpPart ?? 'body'] ?? 'request'
  const queryParameters = httpPart === 'querystring'
    ? new Set(Object.keys((schema as { properties?: object }).properties ?? {}))
    : undefined
  return (value: unknown) => {
    const malformed = queryParameters === undefined
      ? undefined
      : (value as ParsedQuery)[MALFORMED_PARAMETERS]?.find((name) => queryParameters.has(name))
    if (malformed !== undefined) return { error: invalidRequest(`query parameter ${malformed} is not valid percent-encoded UTF-8`) }
    const repeated = queryParameters === undefined ? undefined : [...queryParameters].find((name) => Array.isArray((value as ParsedQuery)[name]))
    if (repeated !== undefined) return { error: invalidRequest(`query parameter ${repeated} is given more than once; give it once`) }
    if (check.Check(value)) return { value }
    const first = check.Errors(value).First()
    return { error: invalidRequest(first === undefined ? `${part} is invalid` : describeViolation(first, part, part === 'request body')) }
  }
}
