import { Kind, Type, TypeRegistry, type Static } from '@sinclair/typebox'
import { isScope } from '../auth/scope-sets.js'
import { SCOPES, type Scope } from '../store/scopes.js'
import { GENERATED_TOKEN, TOKEN_NAME } from '../auth/tokens.js'
import { component, DateTime, ref } from './kinds.js'

/** An access token's id: a UUID for stored tokens, `env:<name>` for those of PLANTSTORE_TOKENS. */
const TOKEN_ID = /^[A-Za-z0-9:._-]{1,80}$/

TypeRegistry.Set('Scope', (_schema, value) => typeof value === 'string' && isScope(value))
TypeRegistry.Set('TokenName', (_schema, value) => typeof value === 'string' && TOKEN_NAME.test(value))
TypeRegistry.Set('TokenId', (_schema, value) => typeof value === 'string' && TOKEN_ID.test(value))

const ScopeName = Type.Unsafe<Scope>({ [Kind]: 'Scope', type: 'string', enum: [...SCOPES] })

const Scopes = (description: string) => Type.Array(ScopeName, {
  minItems: 1,
  uniqueItems: true,
  description,
  examples: [['plants:read']]
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
}, component('NewAccessToken', 'An access token to make. Unknown properties are accepted and ignored.'))
export type NewAccessToken = Static<typeof NewAccessToken>

export const CreatedAccessToken = Type.Object({
  ...tokenFields,
  token: Type.String({
    pattern: GENERATED_TOKEN.source,
    description: 'The token itself: `pst_` and 43 base64url characters. This response is the only time it is ' +
      'shown; the service keeps only its SHA-256 digest.'
  })
}, component('CreatedAccessToken', 'A token just made, with the token itself.'))
export type CreatedAccessToken = Static<typeof CreatedAccessToken>

export const AccessToken = Type.Object({
  ...tokenFields,
  source: Type.Union([Type.Literal('store'), Type.Literal('environment')], {
    description: '`store` for tokens made at run time; `environment` for entries of PLANTSTORE_TOKENS, which only the operator can remove'
  }),
  revokedAt: Type.Optional(DateTime('When the token was revoked, RFC 3339 UTC; absent while it is not'))
}, component('AccessToken', 'An access token as listings show it: never the token or its digest.'))
export type AccessToken = Static<typeof AccessToken>

export const AccessTokenList = Type.Array(ref(AccessToken), {
  description: 'Every token, live, expired and revoked, newest first.'
})

export const AccessTokenIdParams = Type.Object({
  id: Type.Unsafe<string>({ [Kind]: 'TokenId', type: 'string', description: 'The id of the token', examples: ['0b6f2e53-2f1c-4f4e-9a51-3c6d1f0e9a27'] })
})
export type AccessTokenIdParams = Static<typeof AccessTokenIdParams>
