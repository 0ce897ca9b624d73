import { Kind } from '@sinclair/typebox'
import { CHANGE_TYPES } from '../store/change-log.js'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import { TOKEN_NAME_RULE } from '../auth/tokens.js'
import { SCOPES } from '../store/scopes.js'
import { WEBHOOK_EVENT_TYPES } from '../store/webhook-store.js'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { INT64_MAX, INT64_MIN, isInt64, plantTextViolation, type IntegerTextRule, type PlantTextRule } from './kinds.js'
import { NewPlant, PlantPatch, PlantReplacement } from './plants.js'

/**
 * One sentence naming the field of `part` (a request body, a query parameter, an imported line) that
 * broke a rule, and the rule. With `bareFields` a field is named alone (`name must …`), otherwise after
 * the part (`query parameter limit must …`).
 */
export function describeViolation (error: ValueError, part: string, bareFields: boolean): string {
  const field = error.path.slice(1).replaceAll('/', '.')
  if (field === '') {
    return error.type === ValueErrorType.Object ? `${part} must be a JSON object` : `${part} ${error.message}`
  }
  const subject = bareFields ? field : `${part} ${field}`
  if (error.type === ValueErrorType.ObjectRequiredProperty) return `${subject} is required`
  if (error.type === ValueErrorType.Array) return `${subject} must be an array`
  if (error.type === ValueErrorType.ArrayMinItems) return `${subject} must not be empty`
  if (error.type === ValueErrorType.ArrayMaxItems) return `${subject} must hold at most ${error.schema.maxItems} items`
  if (error.type === ValueErrorType.ArrayUniqueItems) return `${subject} must not hold the same value twice`
  if (error.type === ValueErrorType.StringFormat && error.schema.format === 'uri') return `${subject} must be an absolute http or https URL`
  if (error.type === ValueErrorType.StringMaxLength) return `${subject} must be at most ${error.schema.maxLength} characters long`
  if (error.type === ValueErrorType.StringMinLength) {
    return `${subject} must be at least ${error.schema.minLength} character${error.schema.minLength === 1 ? '' : 's'} long`
  }
  switch (error.schema[Kind]) {
    case 'BatchOperation':
      return `${field.replace(/\.(\d+)$/, '[$1]')}: ${batchOperationShapeViolation(error.value) ?? 'is invalid'}`
    case 'Choice':
      return `${subject} must be one of ${(error.schema as unknown as { enum: string[] }).enum.join(', ')}`
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
    case 'ChangeTypeList':
      return `${subject} must be a comma-separated list of ${CHANGE_TYPES.join(', ')}, each at most once`
    case 'WebhookId':
      return `${subject} is not a webhook subscription id`
    case 'Int64':
      return `${subject} must be an integer from -9223372036854775808 to 9223372036854775807`
    case 'IntegerText': {
      const rule = error.schema as unknown as IntegerTextRule
      const range = `a canonical decimal integer from ${rule.minimum ?? INT64_MIN} to ${rule.maximum ?? INT64_MAX}`
      if (error.value !== '') return `${subject} must be ${range}`
      return part === 'path parameter'
        ? `${subject} is missing: the path ends where ${field} belongs (${range})`
        : `${subject} is empty; give ${range}, or leave it out`
    }
    case 'Integer': {
      const { minimum, maximum } = error.schema as { minimum?: number, maximum?: number }
      if (minimum === undefined || maximum === undefined) return `${subject} is invalid: ${error.message}`
      return `${subject} must be a whole number from ${minimum} to ${maximum}`
    }
    case 'PlantText':
      return `${subject} ${plantTextViolation(error.value, error.schema as unknown as PlantTextRule) ?? 'is invalid'}`
    default:
      return `${subject} is invalid: ${error.message}`
  }
}

/** The methods a batch's operations may have. */
export const BATCH_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const
export type BatchMethod = typeof BATCH_METHODS[number]

const BODY_CHECKS = {
  POST: TypeCompiler.Compile(NewPlant),
  PUT: TypeCompiler.Compile(PlantReplacement),
  PATCH: TypeCompiler.Compile(PlantPatch)
} as const

/**
 * Why an item of `operations` is no operation at all (not an object, an unknown `method`), which makes
 * the body not a batch; undefined when it is one. In the words of batchOperationViolation.
 */
export function batchOperationShapeViolation (operation: unknown): string | undefined {
  if (typeof operation !== 'object' || operation === null || Array.isArray(operation)) return 'must be a JSON object'
  const { method } = operation as Record<string, unknown>
  if (typeof method !== 'string' || !(BATCH_METHODS as readonly string[]).includes(method)) return `method must be one of ${BATCH_METHODS.join(', ')}`
  return undefined
}

/**
 * Why a batch's operation breaks the rules of its single request, as the end of a sentence that starts
 * with the operation's place (`operations[3]: …`); undefined when it keeps them. Its body is held to the
 * body rules of the single request, in the same words.
 */
export function batchOperationViolation (operation: unknown): string | undefined {
  const shape = batchOperationShapeViolation(operation)
  if (shape !== undefined) return shape
  const { method, id, body, ifMatch, ifNoneMatch } = operation as Record<string, unknown>
  if (method !== 'POST') {
    if (id === undefined) return 'id is required'
    if (!isInt64(id)) return 'id must be an integer from -9223372036854775808 to 9223372036854775807'
  }
  for (const [name, value] of [['ifMatch', ifMatch], ['ifNoneMatch', ifNoneMatch]] as const) {
    if (value !== undefined && typeof value !== 'string') return `${name} must be a string`
  }
  if (method === 'DELETE') return undefined
  if (body === undefined) return 'body is required'
  const check = BODY_CHECKS[method as keyof typeof BODY_CHECKS]
  if (check.Check(body)) return undefined
  const first = check.Errors(body).First()
  return first === undefined ? 'body is invalid' : describeViolation(first, 'body', true)
}
