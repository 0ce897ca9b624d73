import { FormatRegistry, Kind, Type, TypeRegistry, type Static, type TSchema } from '@sinclair/typebox'

/**
 * The building blocks of every schema, and the custom kinds whose checks plain JSON Schema cannot say as
 * TypeBox checks it; each check lives next to the JSON Schema a client sees:
 * - `Int64`: JSON numbers above 2^53 arrive as `bigint` (see http/json-body.ts), which no JSON Schema
 *   validator knows; the check accepts a safe-integer `number` or an in-range `bigint`.
 * - `PlantText`: lengths count Unicode code points (TypeBox counts UTF-16 units), and U+0000 and
 *   unpaired surrogates are refused so every backend stores the text byte-exactly.
 * - `IntegerText`: a path or query integer, which arrives as text, in its canonical decimal form only.
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

/** RFC 3339 `date-time` (the JSON Schema format): a zone is required, `T` and `Z` in either case. */
const RFC3339_DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

export function isDateTime (value: unknown): value is string {
  if (typeof value !== 'string' || !RFC3339_DATE_TIME.test(value) || Number.isNaN(Date.parse(value.toUpperCase()))) return false
  const [year, month, day, hour, minute, second] = value.split(/[-:Tt.Zz+]/, 6).map(Number) as number[]
  // Date.parse rolls a 30 February over into March: the calendar date must come back as written.
  const date = new Date(Date.UTC(year as number, (month as number) - 1, day))
  return date.getUTCMonth() === (month as number) - 1 && date.getUTCDate() === day &&
    (hour as number) < 24 && (minute as number) < 60 && (second as number) < 60
}

/** A UUID in lower case, as the service makes them. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

TypeRegistry.Set('Int64', (_schema, value) => isInt64(value))
TypeRegistry.Set('DateTime', (_schema, value) => isDateTime(value))
FormatRegistry.Set('uri', (value) => URL.canParse(value))
FormatRegistry.Set('uuid', (value) => UUID.test(value))
TypeRegistry.Set<IntegerTextRule>('IntegerText', (schema, value) => isIntegerText(value, schema))
TypeRegistry.Set<{ enum: readonly string[] }>('Choice', (schema, value) => typeof value === 'string' && schema.enum.includes(value))
TypeRegistry.Set<PlantTextRule & { type: string | string[] }>('PlantText', (schema, value) =>
  (value === null && Array.isArray(schema.type)) || plantTextViolation(value, schema) === undefined)

const INT64_DESCRIPTION = 'a 64-bit signed integer, -9223372036854775808 to 9223372036854775807, kept exactly'

export const Int64 = (description: string) =>
  Type.Unsafe<number | bigint>({
    [Kind]: 'Int64',
    type: 'integer',
    format: 'int64',
    description: `${description}: ${INT64_DESCRIPTION}`,
    examples: [10]
  })

/** An integer path or query parameter: documented as the integer it is, checked as its canonical text. */
export const IntegerText = (options: IntegerTextRule & { format: 'int32' | 'int64', description: string, default?: number, examples: number[] }) =>
  Type.Unsafe<string>({ [Kind]: 'IntegerText', type: 'integer', ...options })

export const PlantText = (rule: PlantTextRule, description: string, example: string) =>
  Type.Unsafe<string>({
    [Kind]: 'PlantText',
    type: 'string',
    ...rule,
    pattern: '^[^\\u0000\\uD800-\\uDFFF]*$',
    description: `${description} (${rule.minLength}–${rule.maxLength} Unicode code points, ` +
      'no U+0000 or unpaired surrogates; stored exactly as sent)',
    examples: [example]
  })

/** A string that must be one of `choices` (a query parameter such as `sort`); its 400 lists them. */
export const Choice = <Value extends string>(choices: readonly Value[], description: string, example: Value) =>
  Type.Unsafe<Value>({ [Kind]: 'Choice', type: 'string', enum: [...choices], description, examples: [example] })

export const DateTime = (description: string) => Type.Unsafe<string>({
  [Kind]: 'DateTime',
  type: 'string',
  format: 'date-time',
  description,
  examples: ['2027-01-31T00:00:00.000Z']
})

export const DEFAULT_PAGE_SIZE = 100
export const MAX_PAGE_SIZE = 1000

/** The `limit` query parameter of a keyset page of `items`. */
export const PageLimit = (items: string) => Type.Optional(IntegerText({
  format: 'int32',
  minimum: 1,
  maximum: MAX_PAGE_SIZE,
  default: DEFAULT_PAGE_SIZE,
  description: `How many ${items} a page holds at most`,
  examples: [DEFAULT_PAGE_SIZE]
}))

/** The `after` query parameter: an exclusive keyset cursor. */
export const PageCursor = (description: string, example: number) =>
  Type.Optional(IntegerText({ format: 'int64', description: `Exclusive cursor: ${description}`, examples: [example] }))

/** A `$ref` to a shared schema that still infers the referenced type in route handlers. */
export function ref<T extends TSchema> (schema: T) {
  if (schema.$id === undefined) throw new Error('only schemas with an $id can be referenced')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}

/** The options of a named schema: an OpenAPI component whose title is its name. */
export function component<Extra extends object> (name: string, description: string, extra?: Extra) {
  return { $id: name, title: name, description, ...extra }
}
