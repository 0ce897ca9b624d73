import { Kind, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import type { FastifyInstance, FastifySchemaCompiler } from 'fastify'
import fp from 'fastify-plugin'
import { SCOPES } from '../store/scopes.js'
import { TOKEN_NAME_RULE } from '../auth/tokens.js'
import { invalidRequest } from '../errors.js'
import { WEBHOOK_EVENT_TYPES } from '../store/webhook-store.js'
import { MALFORMED_PARAMETERS, type ParsedQuery } from './query-string.js'
import { sharedSchemas } from '../schemas/components.js'
import { INT64_MAX, INT64_MIN, plantTextViolation, type IntegerTextRule, type PlantTextRule } from '../schemas/kinds.js'

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
    if (check.Check(value)) return { value }
    const first = check.Errors(value).First()
    return { error: invalidRequest(first === undefined ? `${part} is invalid` : describe(first, part)) }
  }
}

function describe (error: ValueError, part: string): string {
  const field = error.path.slice(1).replaceAll('/', '.')
  if (field === '') {
    return error.type === ValueErrorType.Object ? `${part} must be a JSON object` : `${part} ${error.message}`
  }
  const subject = part === 'request body' ? field : `${part} ${field}`
  if (error.type === ValueErrorType.ObjectRequiredProperty) return `${subject} is required`
  if (error.type === ValueErrorType.ArrayMinItems) return `${subject} must not be empty`
  if (error.type === ValueErrorType.ArrayUniqueItems) return `${subject} must not hold the same value twice`
  if (error.type === ValueErrorType.StringFormat && error.schema.format === 'uri') return `${subject} must be an absolute http or https URL`
  if (error.type === ValueErrorType.StringMaxLength) return `${subject} must be at most ${error.schema.maxLength} characters long`
  switch (error.schema[Kind]) {
    case 'Scope':
      return `${subject} must be one of ${SCOPES.join(', ')}`
    case 'DateTime':
      return `${subject} must be an RFC 3339 date-time with a time zone, such as 2027-01-31T00:00:00Z`
    case 'TokenName':
      return `${subject} ${TOKEN_NAME_RULE}`
    case 'TokenId':
      return `${subject} is not an access token id`
    case 'WebhookEvent':
      return `${subject} must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}`
    case 'WebhookId':
      return `${subject} is not a webhook subscription id`
    case 'Int64':
      return `${subject} must be an integer from -9223372036854775808 to 9223372036854775807`
    case 'IntegerText': {
      const rule = error.schema as unknown as IntegerTextRule
      return `${subject} must be a canonical decimal integer from ${rule.minimum ?? INT64_MIN} to ${rule.maximum ?? INT64_MAX}`
    }
    case 'PlantText':
      return `${subject} ${plantTextViolation(error.value, error.schema as unknown as PlantTextRule) ?? 'is invalid'}`
    default:
      return `${subject} is invalid: ${error.message}`
  }
}
