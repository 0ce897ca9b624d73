import { Kind, Type, TypeRegistry, type Static, type TSchema } from '@sinclair/typebox'

/**
 * The single definition of every shape plantstore reads or writes. Routes validate and serialize with
 * these constants and the OpenAPI document is generated from them.
 *
 * Two field rules cannot be said in plain JSON Schema as TypeBox checks it, so they are custom kinds
 * whose checks live here, next to the JSON Schema a client sees:
 * - `Int64`: JSON numbers above 2^53 arrive as `bigint` (see http/json-body.ts), which no JSON Schema
 *   validator knows; the check accepts a safe-integer `number` or an in-range `bigint`.
 * - `PlantText`: lengths count Unicode code points (TypeBox counts UTF-16 units), and U+0000 and
 *   unpaired surrogates are refused so every backend stores the text byte-exactly.
 */

export const INT64_MIN = -(2n ** 63n)
export const INT64_MAX = 2n ** 63n - 1n

export function isInt64 (value: unknown): value is number | bigint {
  if (typeof value === 'number') return Number.isSafeInteger(value)
  return typeof value === 'bigint' && value >= INT64_MIN && value <= INT64_MAX
}

// Under the `u` flag a well-formed surrogate pair is one code point outside this class.
// eslint-disable-next-line no-control-regex -- U+0000 is exactly what this refuses
const FORBIDDEN_CODE_POINT = /[\u0000\uD800-\uDFFF]/u

export interface PlantTextRule { minLength: number, maxLength: number }

/** Why `value` breaks the text rule, as the end of a sentence that starts with the field name; or undefined. */
export function plantTextViolation (value: unknown, rule: PlantTextRule): string | undefined {
  if (typeof value !== 'string') return 'must be a string'
  if (FORBIDDEN_CODE_POINT.test(value)) return 'must not contain U+0000 or unpaired surrogates'
  // n UTF-16 units hold between n/2 and n code points, so most strings need no counting.
  if (value.length <= rule.maxLength && value.length >= 2 * rule.minLength) return undefined
  const length = codePointLength(value)
  if (length < rule.minLength) return `must be at least ${rule.minLength} character${rule.minLength === 1 ? '' : 's'} long`
  if (length > rule.maxLength) return `must be at most ${rule.maxLength} characters long`
  return undefined
}

/** Code points of a string without unpaired surrogates: every UTF-16 unit but the low halves of pairs. */
function codePointLength (text: string): number {
  let length = 0
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index)
    if (unit < 0xDC00 || unit > 0xDFFF) length++
  }
  return length
}

/** Canonical decimal text: an optional `-`, then digits without leading zeros (so no `+5`, `007`, `-0`, `1e2`). */
const CANONICAL_INTEGER = /^(0|-?[1-9][0-9]{0,18})$/

export interface IntegerTextRule { minimum?: number, maximum?: number }

/** Path and query values arrive as text; only the canonical decimal form of an in-range integer passes. */
export function isIntegerText (value: unknown, rule: IntegerTextRule): value is string {
  if (typeof value !== 'string' || !CANONICAL_INTEGER.test(value)) return false
  const integer = BigInt(value)
  return integer >= (rule.minimum === undefined ? INT64_MIN : BigInt(rule.minimum)) &&
    integer <= (rule.maximum === undefined ? INT64_MAX : BigInt(rule.maximum))
}

TypeRegistry.Set('Int64', (_schema, value) => isInt64(value))
TypeRegistry.Set<IntegerTextRule>('IntegerText', (schema, value) => isIntegerText(value, schema))
TypeRegistry.Set<PlantTextRule>('PlantText', (schema, value) => plantTextViolation(value, schema) === undefined)

const INT64_DESCRIPTION = 'a 64-bit signed integer, -9223372036854775808 to 9223372036854775807, kept exactly'

const Int64 = (description: string) =>
  Type.Unsafe<number | bigint>({
    [Kind]: 'Int64',
    type: 'integer',
    format: 'int64',
    description: `${description}: ${INT64_DESCRIPTION}`,
    examples: [10]
  })

/** An integer path or query parameter: documented as the integer it is, checked as its canonical text. */
const IntegerText = (options: IntegerTextRule & { format: 'int32' | 'int64', description: string, default?: number, examples: number[] }) =>
  Type.Unsafe<string>({ [Kind]: 'IntegerText', type: 'integer', ...options })

const PlantText = (rule: PlantTextRule, description: string, example: string) =>
  Type.Unsafe<string>({
    [Kind]: 'PlantText',
    type: 'string',
    ...rule,
    pattern: '^[^\\u0000\\uD800-\\uDFFF]*$',
    description: `${description} (${rule.minLength}–${rule.maxLength} Unicode code points, ` +
      'no U+0000 or unpaired surrogates; stored exactly as sent)',
    examples: [example]
  })

const plantFields = {
  name: PlantText({ minLength: 1, maxLength: 256 }, 'The name of the plant', 'Monstera deliciosa'),
  tag: Type.Optional(PlantText({ minLength: 0, maxLength: 256 }, 'Tag that specifies the type of the plant', 'tropical'))
}

export const Plant = Type.Object(plantFields, {
  $id: 'Plant',
  title: 'Plant',
  description: 'A plant as the store returns it after a create: its name, and its tag when one was given.'
})
export type Plant = Static<typeof Plant>

export const NewPlant = Type.Object({
  id: Int64('Identification number of the plant'),
  ...plantFields
}, {
  $id: 'NewPlant',
  title: 'NewPlant',
  description: 'A plant to create. Unknown properties are accepted and ignored.'
})
export type NewPlant = Static<typeof NewPlant>

export const StoredPlant = Type.Object({
  id: Int64('Identification number of the plant'),
  ...plantFields
}, {
  $id: 'StoredPlant',
  title: 'StoredPlant',
  description: 'A plant as the store holds it: id, name, and tag when one was given.'
})
export type StoredPlant = Static<typeof StoredPlant>

export const StoredPlantPage = Type.Array(ref(StoredPlant), {
  description: 'Plants ordered by id ascending. A `Link: <…>; rel="next"` header names the next page while more plants remain.'
})

export const PlantIdParams = Type.Object({
  id: IntegerText({ format: 'int64', description: 'The id of the plant, in canonical decimal form', examples: [10] })
})
export type PlantIdParams = Static<typeof PlantIdParams>

export const DEFAULT_PAGE_SIZE = 100
export const MAX_PAGE_SIZE = 1000

export const PageQuery = Type.Object({
  limit: Type.Optional(IntegerText({
    format: 'int32',
    minimum: 1,
    maximum: MAX_PAGE_SIZE,
    default: DEFAULT_PAGE_SIZE,
    description: 'How many plants a page holds at most',
    examples: [DEFAULT_PAGE_SIZE]
  })),
  after: Type.Optional(IntegerText({
    format: 'int64',
    description: 'Exclusive cursor: the page starts with the first plant whose id is greater (it need not exist)',
    examples: [10]
  }))
})
export type PageQuery = Static<typeof PageQuery>

export const ErrorBody = Type.Object({
  error: Type.Integer({ format: 'int32', description: 'The HTTP status code of the response', examples: [400] }),
  message: Type.String({ description: 'What went wrong, as a human sentence', examples: ['name must be at most 256 characters long'] })
}, {
  $id: 'Error',
  title: 'Error',
  description: 'The body of every error response; `error` always equals the HTTP status.'
})
export type ErrorBody = Static<typeof ErrorBody>

export const Health = Type.Object({
  status: Type.Literal('ok')
}, { $id: 'Health', title: 'Health' })
export type Health = Static<typeof Health>

/** Every schema with an `$id`: registered once on the app, emitted as OpenAPI components. */
export const sharedSchemas: readonly TSchema[] = [Plant, NewPlant, StoredPlant, ErrorBody, Health]

/** A `$ref` to a shared schema that still infers the referenced type in route handlers. */
export function ref<T extends TSchema> (schema: T) {
  if (schema.$id === undefined) throw new Error('only schemas with an $id can be referenced')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}
