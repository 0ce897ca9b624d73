import { ConfigError, integerVariable, valueOf, type Env, type ReadVariable } from '../../config-variables.js'

/** The signature algorithms a JWT access token may use: asymmetric ones only, so the service never holds a signing secret. */
export const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const
export type JwtAlgorithm = typeof JWT_ALGORITHMS[number]

/** How JWT access tokens from the organisation's identity provider are judged (docs/reference/jwt.md). */
export interface JwtSettings {
  /** The `iss` a token must carry, exactly as the provider writes it. */
  readonly issuer: string
  /** A token's `aud` must contain one of these. */
  readonly audiences: readonly string[]
  /** Where the provider's key set is; undefined: found by OpenID Connect discovery from the issuer. */
  readonly jwksUrl: string | undefined
  readonly algorithms: readonly JwtAlgorithm[]
  /** The claim holding the token's scopes: a space-separated string or an array of strings. */
  readonly scopeClaim: string
  /** How far `exp`, `nbf` and `iat` may be off the service's clock. */
  readonly clockToleranceS: number
}

/**
 * The `AUTH_JWT_*` variables: undefined (JWT access tokens off) without `AUTH_JWT_ISSUER`, when the others
 * are not judged either, as OTEL_* variables are not with tracing off.
 */
export function jwtSettingsVariables (env: Env, read: ReadVariable): JwtSettings | undefined {
  const issuer = read(() => issuerVariable(env), undefined)
  if (valueOf(env, 'AUTH_JWT_ISSUER') === undefined) return undefined
  const settings: JwtSettings = Object.freeze({
    issuer: issuer ?? '',
    audiences: Object.freeze(read(() => audienceVariable(env), [])),
    jwksUrl: read(() => jwksUrlVariable(env), undefined),
    algorithms: Object.freeze(read(() => algorithmsVariable(env), [])),
    scopeClaim: read(() => scopeClaimVariable(env), ''),
    clockToleranceS: read(() => integerVariable(env, 'AUTH_JWT_CLOCK_TOLERANCE_S', 30, 0, 300), 0)
  })
  return settings
}

function isHttpUrl (text: string): boolean {
  return URL.canParse(text) && /^https?:$/.test(new URL(text).protocol)
}

/** OpenID Connect Discovery §3: an issuer is a URL with no query, fragment or credentials, compared as written. */
function issuerVariable (env: Env): string | undefined {
  const issuer = valueOf(env, 'AUTH_JWT_ISSUER')
  if (issuer === undefined) return undefined
  const url = isHttpUrl(issuer) ? new URL(issuer) : undefined
  if (url !== undefined && issuer.trim() === issuer && url.search === '' && url.hash === '' && url.username === '' && url.password === '') return issuer
  throw new ConfigError('AUTH_JWT_ISSUER', `must be the identity provider's issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got ${JSON.stringify(url === undefined || url.username === '' ? issuer : '(a URL with credentials)')}`)
}

function audienceVariable (env: Env): string[] {
  const text = valueOf(env, 'AUTH_JWT_AUDIENCE')
  const audiences = (text ?? '').split(',').map((audience) => audience.trim()).filter((audience) => audience !== '')
  if (audiences.length > 0) return audiences
  throw new ConfigError('AUTH_JWT_AUDIENCE', 'must name the audience (comma-separated, one of which a token\'s "aud" must contain) when AUTH_JWT_ISSUER is set: ' +
    'without it a token the provider issued for any other service would be accepted')
}

function jwksUrlVariable (env: Env): string | undefined {
  const url = valueOf(env, 'AUTH_JWT_JWKS_URL')
  if (url === undefined || isHttpUrl(url)) return url
  throw new ConfigError('AUTH_JWT_JWKS_URL', `must be an http or https URL of the provider's key set, got ${JSON.stringify(url)}`)
}

function algorithmsVariable (env: Env): JwtAlgorithm[] {
  const text = valueOf(env, 'AUTH_JWT_ALGORITHMS') ?? 'RS256,ES256,EdDSA'
  const names = text.split(',').map((name) => name.trim()).filter((name) => name !== '')
  const refused = names.find((name) => /^HS\d+$/i.test(name) || name.toLowerCase() === 'none')
  if (refused !== undefined) {
    throw new ConfigError('AUTH_JWT_ALGORITHMS', `must not allow ${JSON.stringify(refused)}: only the provider's public-key algorithms are accepted (${JWT_ALGORITHMS.join(', ')})`)
  }
  const unknown = names.find((name) => !(JWT_ALGORITHMS as readonly string[]).includes(name))
  if (unknown !== undefined || names.length === 0) {
    throw new ConfigError('AUTH_JWT_ALGORITHMS', `must be comma-separated names of ${JWT_ALGORITHMS.join(', ')}, got ${JSON.stringify(text)}`)
  }
  return [...new Set(names)] as JwtAlgorithm[]
}

function scopeClaimVariable (env: Env): string {
  const claim = valueOf(env, 'AUTH_JWT_SCOPE_CLAIM') ?? 'scope'
  if (claim.trim() === claim) return claim
  throw new ConfigError('AUTH_JWT_SCOPE_CLAIM', `must be a claim name without surrounding spaces, got ${JSON.stringify(claim)}`)
}
