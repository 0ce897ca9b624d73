import { FormatRegistry, Kind, Type, TypeRegistry, type Static, type TSchema } from '@sinclair/typebox'
import { isScope, SCOPES, type Scope } from './auth/scopes.js'
import { GENERATED_TOKEN, TOKEN_NAME } from './auth/tokens.js'
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from './store/webhook-store.js'

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

/** An access token's id: a UUID for stored tokens, `env:<name>` for those of PLANTSTORE_TOKENS. */
const TOKEN_ID = /^[A-Za-z0-9:._-]{1,80}$/
/** A webhook subscription's id: a UUID. */
const WEBHOOK_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

TypeRegistry.Set('Int64', (_schema, value) => isInt64(value))
TypeRegistry.Set('Scope', (_schema, value) => typeof value === 'string' && isScope(value))
TypeRegistry.Set('DateTime', (_schema, value) => isDateTime(value))
TypeRegistry.Set('TokenName', (_schema, value) => typeof value === 'string' && TOKEN_NAME.test(value))
TypeRegistry.Set('TokenId', (_schema, value) => typeof value === 'string' && TOKEN_ID.test(value))
FormatRegistry.Set('uri', (value) => URL.canParse(value))
FormatRegistry.Set('uuid', (value) => WEBHOOK_ID.test(value))
TypeRegistry.Set('WebhookEvent', (_schema, value) => typeof value === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value))
TypeRegistry.Set('WebhookId', (_schema, value) => typeof value === 'string' && WEBHOOK_ID.test(value))
TypeRegistry.Set<IntegerTextRule>('IntegerText', (schema, value) => isIntegerText(value, schema))
TypeRegistry.Set<PlantTextRule & { type: string | string[] }>('PlantText', (schema, value) =>
  (value === null && Array.isArray(schema.type)) || plantTextViolation(value, schema) === undefined)

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

const NAME_RULE = { minLength: 1, maxLength: 256 }
const TAG_RULE = { minLength: 0, maxLength: 256 }

const plantFields = {
  name: PlantText(NAME_RULE, 'The name of the plant', 'Monstera deliciosa'),
  tag: Type.Optional(PlantText(TAG_RULE, 'Tag that specifies the type of the plant', 'tropical'))
}

/** The id member a PUT or PATCH body may repeat: only the path's own id, in any JSON integer spelling. */
const repeatedId = Type.Optional(Int64('The id of the plant; when present it must equal the id in the path'))

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

export const PlantReplacement = Type.Object({
  id: repeatedId,
  ...plantFields
}, {
  $id: 'PlantReplacement',
  title: 'PlantReplacement',
  description: 'The whole new state of a plant: a `Plant`. A tag absent from it is absent afterwards. Unknown ' +
    'properties are accepted and ignored.',
  examples: [{ name: 'Monstera deliciosa', tag: 'tropical' }]
})
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
}, {
  $id: 'PlantPatch',
  title: 'PlantPatch',
  description: 'A JSON merge patch (RFC 7396) of a plant: members that are present change the plant, absent ones ' +
    'leave it as it is, `"tag": null` removes the tag. Unknown properties are accepted and ignored.',
  examples: [{ name: 'Swiss cheese plant' }, { tag: null }]
})
export type PlantPatch = Static<typeof PlantPatch>

export const StoredPlantPage = Type.Array(ref(StoredPlant), {
  description: 'Plants ordered by id ascending. A `Link: <…>; rel="next"` header names the next page while more plants remain.'
})

export const PlantIdParams = Type.Object({
  id: IntegerText({ format: 'int64', description: 'The id of the plant, in canonical decimal form', examples: [10] })
})
export type PlantIdParams = Static<typeof PlantIdParams>

export const DEFAULT_PAGE_SIZE = 100
export const MAX_PAGE_SIZE = 1000

/** The `limit` query parameter of a keyset page of `items`. */
const PageLimit = (items: string) => Type.Optional(IntegerText({
  format: 'int32',
  minimum: 1,
  maximum: MAX_PAGE_SIZE,
  default: DEFAULT_PAGE_SIZE,
  description: `How many ${items} a page holds at most`,
  examples: [DEFAULT_PAGE_SIZE]
}))

/** The `after` query parameter: an exclusive keyset cursor. */
const PageCursor = (description: string, example: number) =>
  Type.Optional(IntegerText({ format: 'int64', description: `Exclusive cursor: ${description}`, examples: [example] }))

export const PageQuery = Type.Object({
  limit: PageLimit('plants'),
  after: PageCursor('the page starts with the first plant whose id is greater (it need not exist)', 10)
})
export type PageQuery = Static<typeof PageQuery>

export const PlantListQuery = Type.Object({
  ...PageQuery.properties,
  tag: Type.Optional(PlantText(TAG_RULE, 'Only plants whose tag is exactly this (empty: the empty tag; plants ' +
    'without a tag never match)', 'tropical'))
})
export type PlantListQuery = Static<typeof PlantListQuery>

const ScopeName = Type.Unsafe<Scope>({ [Kind]: 'Scope', type: 'string', enum: [...SCOPES] })

const Scopes = (description: string) => Type.Array(ScopeName, {
  minItems: 1,
  uniqueItems: true,
  description,
  examples: [['plants:read']]
})

const DateTime = (description: string) => Type.Unsafe<string>({
  [Kind]: 'DateTime',
  type: 'string',
  format: 'date-time',
  description,
  examples: ['2027-01-31T00:00:00.000Z']
})

const TokenName = Type.Unsafe<string>({
  [Kind]: 'TokenName',
  type: 'string',
  minLength: 1,
  maxLength: 64,
  pattern: TOKEN_NAME.source,
  description: 'What the token is for, shown in log lines and listings: 1–64 characters of A–Z, a–z, 0–9, ".", "_" ' +
    'and "-", unique among live tokens',
  examples: ['grafana-dashboard']
})

const tokenFields = {
  id: Type.String({ description: 'The token\'s id: a UUID, or `env:<name>` for an entry of PLANTSTORE_TOKENS', examples: ['0b6f2e53-2f1c-4f4e-9a51-3c6d1f0e9a27'] }),
  name: TokenName,
  scopes: Scopes('What the token may do'),
  createdAt: DateTime('When the token was made (for an entry of PLANTSTORE_TOKENS: when this instance read it), RFC 3339 UTC'),
  expiresAt: Type.Optional(DateTime('When the token stops being accepted, RFC 3339 UTC; absent when it does not expire'))
}

export const NewAccessToken = Type.Object({
  name: TokenName,
  scopes: Scopes('What the token may do: a non-empty set of plants:read, plants:write and admin'),
  expiresAt: Type.Optional(DateTime('When the token stops being accepted: a future RFC 3339 date-time; absent for never'))
}, {
  $id: 'NewAccessToken',
  title: 'NewAccessToken',
  description: 'An access token to make. Unknown properties are accepted and ignored.'
})
export type NewAccessToken = Static<typeof NewAccessToken>

export const CreatedAccessToken = Type.Object({
  ...tokenFields,
  token: Type.String({
    pattern: GENERATED_TOKEN.source,
    description: 'The token itself: `pst_` and 43 base64url characters. This response is the only time it is ' +
      'shown; the service keeps only its SHA-256 digest.'
  })
}, {
  $id: 'CreatedAccessToken',
  title: 'CreatedAccessToken',
  description: 'A token just made, with the token itself.'
})
export type CreatedAccessToken = Static<typeof CreatedAccessToken>

export const AccessToken = Type.Object({
  ...tokenFields,
  source: Type.Union([Type.Literal('store'), Type.Literal('environment')], {
    description: '`store` for tokens made at run time; `environment` for entries of PLANTSTORE_TOKENS, which only the operator can remove'
  }),
  revokedAt: Type.Optional(DateTime('When the token was revoked, RFC 3339 UTC; absent while it is not'))
}, {
  $id: 'AccessToken',
  title: 'AccessToken',
  description: 'An access token as listings show it: never the token or its digest.'
})
export type AccessToken = Static<typeof AccessToken>

export const AccessTokenList = Type.Array(ref(AccessToken), {
  description: 'Every token, live, expired and revoked, newest first.'
})

export const AccessTokenIdParams = Type.Object({
  id: Type.Unsafe<string>({ [Kind]: 'TokenId', type: 'string', description: 'The id of the token', examples: ['0b6f2e53-2f1c-4f4e-9a51-3c6d1f0e9a27'] })
})
export type AccessTokenIdParams = Static<typeof AccessTokenIdParams>

const WebhookEvent = Type.Unsafe<WebhookEventType>({ [Kind]: 'WebhookEvent', type: 'string', enum: [...WEBHOOK_EVENT_TYPES] })

export const MAX_WEBHOOK_URL_LENGTH = 2048

const webhookFields = {
  id: Type.String({ format: 'uuid', description: 'The subscription\'s id', examples: ['5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'] }),
  url: Type.String({ format: 'uri', description: 'Where events are posted', examples: ['https://example.com/hooks/plantstore'] }),
  events: Type.Array(WebhookEvent, { minItems: 1, uniqueItems: true, description: 'The events sent to it', examples: [['plant.created']] }),
  createdAt: DateTime('When the subscription was made, RFC 3339 UTC'),
  disabledAt: Type.Optional(DateTime('When the receiver answered 410 Gone, which disabled the subscription; absent while it is enabled')),
  disabledReason: Type.Optional(Type.String({ description: 'Why the subscription is disabled', examples: ['the receiver answered 410 Gone'] }))
}

export const NewWebhookSubscription = Type.Object({
  url: Type.String({
    minLength: 1,
    maxLength: MAX_WEBHOOK_URL_LENGTH,
    format: 'uri',
    description: 'An http or https URL. Loopback, private and link-local addresses are refused unless the service runs ' +
      'with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true; the address is checked again at every delivery.',
    examples: ['https://example.com/hooks/plantstore']
  }),
  events: Type.Optional(Type.Array(WebhookEvent, {
    minItems: 1,
    uniqueItems: true,
    description: 'A non-empty set of plant.created, plant.updated and plant.deleted; all three when absent',
    examples: [['plant.created']]
  }))
}, {
  $id: 'NewWebhookSubscription',
  title: 'NewWebhookSubscription',
  description: 'A webhook subscription to make. Unknown properties are accepted and ignored.'
})
export type NewWebhookSubscription = Static<typeof NewWebhookSubscription>

export const WebhookSubscription = Type.Object(webhookFields, {
  $id: 'WebhookSubscription',
  title: 'WebhookSubscription',
  description: 'A webhook subscription, without its signing secret.'
})

export const CreatedWebhookSubscription = Type.Object({
  ...webhookFields,
  secret: Type.String({
    pattern: '^whsec_[A-Za-z0-9+/]+={0,2}$',
    description: 'The signing secret, in the Standard Webhooks form `whsec_<base64>`. This response is the only time it is shown.',
    examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw1u3E4ERhSGs=']
  })
}, {
  $id: 'CreatedWebhookSubscription',
  title: 'CreatedWebhookSubscription',
  description: 'A subscription just made, with its signing secret.'
})

export const WebhookSubscriptionStatus = Type.Object({
  ...webhookFields,
  pending: Type.Integer({ minimum: 0, description: 'Events waiting for delivery, retries included' }),
  delivered: Type.Integer({ minimum: 0, description: 'Events delivered (a 2xx answer)' }),
  failed: Type.Integer({ minimum: 0, description: 'Events given up on after 24 h of retries, or dropped when the subscription was disabled' }),
  lastError: Type.Optional(Type.Object({
    at: DateTime('When the attempt failed, RFC 3339 UTC'),
    message: Type.String({ description: 'The status code (`HTTP 500`) or the error of the attempt', examples: ['HTTP 503'] })
  }, { description: 'The most recent failed attempt; absent if none failed' }))
}, {
  $id: 'WebhookSubscriptionStatus',
  title: 'WebhookSubscriptionStatus',
  description: 'A subscription with its delivery counts.'
})

export const WebhookSubscriptionList = Type.Array(ref(WebhookSubscription), { description: 'Every subscription, newest first.' })

export const DeliveryAttempt = Type.Object({
  id: Type.String({ pattern: '^[0-9]+$', description: 'The attempt\'s id, for `after`', examples: ['17'] }),
  eventId: Type.String({ description: 'The event\'s `webhook-id`, the same on every attempt of the event', examples: ['msg_6f1c0e2b9a8d4c3b8e7f6a5b4c3d2e1f'] }),
  type: WebhookEvent,
  attempt: Type.Integer({ minimum: 1, description: '1 for the first attempt of the event, 2 for its first retry, …' }),
  statusCode: Type.Optional(Type.Integer({ description: 'The receiver\'s status code; absent when no answer came', examples: [200] })),
  error: Type.Optional(Type.String({ description: 'Why no answer came (timeout, connection refused, …)', examples: ['no answer within 10 s'] })),
  at: DateTime('When the attempt was made, RFC 3339 UTC')
}, {
  $id: 'DeliveryAttempt',
  title: 'DeliveryAttempt',
  description: 'One attempt to deliver one event.'
})

export const DeliveryAttemptPage = Type.Array(ref(DeliveryAttempt), {
  description: 'Attempts newest first. A `Link: <…>; rel="next"` header names the page of older ones while there are more.'
})

export const WebhookIdParams = Type.Object({
  id: Type.Unsafe<string>({ [Kind]: 'WebhookId', type: 'string', format: 'uuid', description: 'The id of the subscription', examples: ['5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'] })
})
export type WebhookIdParams = Static<typeof WebhookIdParams>

export const DeliveryAttemptQuery = Type.Object({
  limit: PageLimit('attempts'),
  after: PageCursor('the page starts with the newest attempt whose id is smaller', 17)
})
export type DeliveryAttemptQuery = Static<typeof DeliveryAttemptQuery>

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
export const sharedSchemas: readonly TSchema[] = [
  Plant, NewPlant, StoredPlant, PlantReplacement, PlantPatch, NewAccessToken, CreatedAccessToken, AccessToken,
  NewWebhookSubscription, WebhookSubscription, CreatedWebhookSubscription, WebhookSubscriptionStatus, DeliveryAttempt, ErrorBody, Health
]

/** A `$ref` to a shared schema that still infers the referenced type in route handlers. */
export function ref<T extends TSchema> (schema: T) {
  if (schema.$id === undefined) throw new Error('only schemas with an $id can be referenced')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}
