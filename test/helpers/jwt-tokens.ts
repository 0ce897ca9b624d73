import { createHash, randomBytes, randomUUID } from 'node:crypto'
import type { Claims, IdentityProvider, IdentityProviderOptions } from './identity-provider.js'
import type { TestSigningKey } from './signing-keys.js'

/** The audience the JWT tests configure (`AUTH_JWT_AUDIENCE`) unless a case says otherwise. */
export const TEST_AUDIENCE = 'plantstore-api'

/** The Entra ID tenant of the tests, and the API's application (client) ID there: a v2.0 token's `aud`. */
export const ENTRA_TENANT_ID = '4f1d6e2a-8c3b-4a7e-9d15-2b6c8e0f7a31'
export const ENTRA_API_CLIENT_ID = 'b7e3c9d1-5a2f-4e8b-a6c4-91d0f3e7b258'

type Provider = Pick<IdentityProvider, 'issuer' | 'sign'>

/** Claim changes: each replaces the baseline's claim; `undefined` removes it (a token without `exp`…). */
export type ClaimOverrides = Readonly<Record<string, unknown>>

/** What a provider-shaped token is for: the client asking, and what it was granted. */
export interface ClientGrant {
  readonly clientId: string
  /** The scopes (Keycloak, Auth0) or app roles (Entra ID) granted, e.g. `['plants:read']`. */
  readonly scopes: readonly string[]
  /** The token's audience: `TEST_AUDIENCE` (Entra ID: `ENTRA_API_CLIENT_ID`) unless given. */
  readonly audience?: string
  /** The key to sign with: the provider's first published one unless given. */
  readonly key?: TestSigningKey
}

/** Now, in whole seconds since the epoch (the unit of `exp`, `nbf`, `iat`). */
export function nowSeconds (): number {
  return Math.floor(Date.now() / 1000)
}

/**
 * A valid claim set from `provider` for plantstore: `iss`, `aud` `plantstore-api`, `sub` `test-client`,
 * `iat` and `nbf` now, `exp` in 300 s, `scope` `plants:read plants:write`, a fresh `jti`; then `overrides`.
 */
export function claimsFor (provider: Pick<IdentityProvider, 'issuer'>, overrides: ClaimOverrides = {}): Claims {
  const now = nowSeconds()
  return withOverrides({
    iss: provider.issuer,
    aud: TEST_AUDIENCE,
    sub: 'test-client',
    iat: now,
    nbf: now,
    exp: now + 300,
    jti: randomUUID(),
    scope: 'plants:read plants:write'
  }, overrides)
}

/** Where an issuer lives on the test server for each provider, to spread into `startIdentityProvider`'s options. */
export type ProviderLayout = Pick<IdentityProviderOptions, 'issuerPath' | 'trailingSlash' | 'jwksPath'>

/** Keycloak: issuer `<base>/realms/<realm>`, keys at `<issuer>/protocol/openid-connect/certs`. */
export function keycloakLayout (realm = 'plants'): ProviderLayout {
  return { issuerPath: `/realms/${realm}`, jwksPath: `/realms/${realm}/protocol/openid-connect/certs` }
}

/** Auth0: issuer `https://<tenant domain>/` (the origin, with its trailing slash), keys at `/.well-known/jwks.json`. */
export function auth0Layout (): ProviderLayout {
  return { issuerPath: '', trailingSlash: true, jwksPath: '/.well-known/jwks.json' }
}

/** Entra ID v2.0: issuer `<base>/<tenant id>/v2.0`, keys at `<base>/<tenant id>/discovery/v2.0/keys`. */
export function entraLayout (tenantId = ENTRA_TENANT_ID): ProviderLayout {
  return { issuerPath: `/${tenantId}/v2.0`, jwksPath: `/${tenantId}/discovery/v2.0/keys` }
}

/**
 * An access token as Keycloak issues it to a confidential client by client credentials (its service
 * account). Scopes: `scope`, space-separated, the realm's default client scopes (`profile email`) first,
 * then the optional client scopes the client asked for. `aud` is an array when an audience mapper adds
 * the API (`[audience, 'account']`); `sub` is the service-account user's UUID; lifetime 300 s (the default).
 */
export async function keycloakAccessToken (provider: Provider, grant: ClientGrant, overrides: ClaimOverrides = {}): Promise<string> {
  const now = nowSeconds()
  const realm = /\/realms\/([^/]+)\/?$/.exec(provider.issuer)?.[1] ?? 'plants'
  const claims = withOverrides({
    exp: now + 300,
    iat: now,
    jti: randomUUID(),
    iss: provider.issuer,
    aud: [grant.audience ?? TEST_AUDIENCE, 'account'],
    sub: uuidFrom(`keycloak service account ${grant.clientId}`),
    typ: 'Bearer',
    azp: grant.clientId,
    acr: '1',
    realm_access: { roles: ['offline_access', 'uma_authorization', `default-roles-${realm}`] },
    resource_access: { account: { roles: ['manage-account', 'manage-account-links', 'view-profile'] } },
    scope: ['profile', 'email', ...grant.scopes].join(' '),
    clientHost: '127.0.0.1',
    email_verified: false,
    preferred_username: `service-account-${grant.clientId}`,
    clientAddress: '127.0.0.1',
    client_id: grant.clientId
  }, overrides)
  return provider.sign(claims, withKey(grant, {}))
}

/**
 * An access token as Auth0 issues it to a machine-to-machine application by client credentials, in the
 * API's token profile: `auth0` (the default; header `typ: JWT`, `azp`, `gty: client-credentials`) or
 * `rfc9068` (header `typ: at+jwt`, `client_id`, `jti`). Scopes: `scope`, space-separated (the API's
 * permissions granted to the application); with RBAC's "Add Permissions in the Access Token" also
 * `permissions`, an array. `sub` is `<client id>@clients`; `aud` the API identifier, a string; 24 h life.
 */
export async function auth0AccessToken (
  provider: Provider,
  grant: ClientGrant & { readonly profile?: 'auth0' | 'rfc9068', readonly permissions?: boolean },
  overrides: ClaimOverrides = {}
): Promise<string> {
  const now = nowSeconds()
  const rfc9068 = grant.profile === 'rfc9068'
  const claims = withOverrides({
    iss: provider.issuer,
    sub: `${grant.clientId}@clients`,
    aud: grant.audience ?? TEST_AUDIENCE,
    iat: now,
    exp: now + 86_400,
    ...(rfc9068 ? { client_id: grant.clientId, jti: randomBytes(16).toString('base64url') } : {}),
    scope: grant.scopes.join(' '),
    ...(rfc9068 ? {} : { gty: 'client-credentials', azp: grant.clientId }),
    ...(grant.permissions === true ? { permissions: [...grant.scopes] } : {})
  }, overrides)
  return provider.sign(claims, withKey(grant, { typ: rfc9068 ? 'at+jwt' : 'JWT' }))
}

/**
 * An app-only access token as Entra ID's v2.0 endpoint issues it by client credentials. Scopes: the
 * application permissions (app roles) granted to the client are in `roles`, an array (delegated
 * permissions would be in `scp`, space-separated, and are absent here), so plantstore needs
 * `AUTH_JWT_SCOPE_CLAIM=roles`. `aud` is the API's client ID (v2.0 tokens always name it so); `sub` and
 * `oid` the client's service principal; `tid` the tenant of the issuer's path; lifetime about an hour.
 */
export async function entraAccessToken (provider: Provider, grant: ClientGrant, overrides: ClaimOverrides = {}): Promise<string> {
  const now = nowSeconds()
  const tenantId = /\/([^/]+)\/v2\.0\/?$/.exec(provider.issuer)?.[1] ?? ENTRA_TENANT_ID
  const servicePrincipal = uuidFrom(`entra service principal ${grant.clientId}`)
  const claims = withOverrides({
    aud: grant.audience ?? ENTRA_API_CLIENT_ID,
    iss: provider.issuer,
    iat: now,
    nbf: now,
    exp: now + 3599,
    aio: opaque(60),
    azp: grant.clientId,
    azpacr: '1',
    idtyp: 'app',
    oid: servicePrincipal,
    rh: `0.${opaque(40)}.`,
    roles: [...grant.scopes],
    sub: servicePrincipal,
    tid: tenantId,
    uti: opaque(22),
    ver: '2.0'
  }, overrides)
  return provider.sign(claims, withKey(grant, {}))
}

function withOverrides (baseline: Claims, overrides: ClaimOverrides): Claims {
  return Object.fromEntries(Object.entries({ ...baseline, ...overrides }).filter(([, value]) => value !== undefined))
}

function withKey (grant: ClientGrant, header: Readonly<Record<string, unknown>>): { readonly key?: TestSigningKey, readonly header: Readonly<Record<string, unknown>> } {
  return grant.key === undefined ? { header } : { key: grant.key, header }
}

/** A UUID (version 5 layout) derived from `name`: the same client always gets the same subject. */
function uuidFrom (name: string): string {
  const hex = createHash('sha1').update(name).digest('hex')
  const variant = ((Number.parseInt(hex.slice(16, 17), 16) & 0x3) | 0x8).toString(16)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

function opaque (length: number): string {
  return randomBytes(length).toString('base64url').slice(0, length)
}
