import { describe, expect, it } from 'vitest'
import { InvalidConfigError, loadConfig } from '../../src/config.js'

const ISSUER = 'https://id.example.com/realms/plants'

/** The lines a start with this environment would print, one per bad variable. */
function problemsOf (env: Record<string, string>): string[] {
  try {
    loadConfig(env, false)
  } catch (error) {
    if (error instanceof InvalidConfigError) return error.errors.map((problem) => problem.message)
    throw error
  }
  return []
}

describe('JWT access token settings (AUTH_JWT_*)', () => {
  it('are off without AUTH_JWT_ISSUER, whatever the other AUTH_JWT_* variables hold', () => {
    expect(loadConfig({ AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_ALGORITHMS: 'HS256', AUTH_JWT_JWKS_URL: 'not a url' }, false).jwt).toBeUndefined()
  })

  it('take the documented defaults next to an issuer and its audience', () => {
    expect(loadConfig({ AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore' }, false).jwt).toEqual({
      issuer: ISSUER,
      audiences: ['plantstore'],
      jwksUrl: undefined,
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      scopeClaim: 'scope',
      clockToleranceS: 30
    })
  })

  it('read every variable: audiences and algorithms comma-separated, the issuer exactly as written', () => {
    const jwt = loadConfig({
      AUTH_JWT_ISSUER: 'https://tenant.eu.auth0.com/',
      AUTH_JWT_AUDIENCE: ' https://plants.example.com , api://plantstore ',
      AUTH_JWT_JWKS_URL: 'https://tenant.eu.auth0.com/.well-known/jwks.json',
      AUTH_JWT_ALGORITHMS: 'PS256, ES384,Ed25519',
      AUTH_JWT_SCOPE_CLAIM: 'roles',
      AUTH_JWT_CLOCK_TOLERANCE_S: '0'
    }, false).jwt

    expect(jwt).toEqual({
      issuer: 'https://tenant.eu.auth0.com/',
      audiences: ['https://plants.example.com', 'api://plantstore'],
      jwksUrl: 'https://tenant.eu.auth0.com/.well-known/jwks.json',
      algorithms: ['PS256', 'ES384', 'Ed25519'],
      scopeClaim: 'roles',
      clockToleranceS: 0
    })
    expect(Object.isFrozen(jwt)).toBe(true)
    expect(Object.isFrozen(jwt?.audiences)).toBe(true)
  })

  it.each<[string, Record<string, string>, string]>([
    ['an issuer without an audience', { AUTH_JWT_ISSUER: ISSUER },
      'AUTH_JWT_AUDIENCE must name the audience (comma-separated, one of which a token\'s "aud" must contain) when AUTH_JWT_ISSUER is set: ' +
      'without it a token the provider issued for any other service would be accepted'],
    ['an audience of commas only', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: ' , ' },
      'AUTH_JWT_AUDIENCE must name the audience (comma-separated, one of which a token\'s "aud" must contain) when AUTH_JWT_ISSUER is set: ' +
      'without it a token the provider issued for any other service would be accepted'],
    ['a malformed issuer', { AUTH_JWT_ISSUER: 'id.example.com/realms/plants', AUTH_JWT_AUDIENCE: 'plantstore' },
      'AUTH_JWT_ISSUER must be the identity provider\'s issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got "id.example.com/realms/plants"'],
    ['an issuer that is not http or https', { AUTH_JWT_ISSUER: 'ftp://id.example.com', AUTH_JWT_AUDIENCE: 'plantstore' },
      'AUTH_JWT_ISSUER must be the identity provider\'s issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got "ftp://id.example.com"'],
    ['an issuer with a query', { AUTH_JWT_ISSUER: 'https://id.example.com/realms/plants?x=1', AUTH_JWT_AUDIENCE: 'plantstore' },
      'AUTH_JWT_ISSUER must be the identity provider\'s issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got "https://id.example.com/realms/plants?x=1"'],
    ['an issuer with credentials, which the line does not echo', { AUTH_JWT_ISSUER: 'https://admin:s3cret@id.example.com/realms/plants', AUTH_JWT_AUDIENCE: 'plantstore' },
      'AUTH_JWT_ISSUER must be the identity provider\'s issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got "(a URL with credentials)"'],
    ['an issuer with a space after it, which no token\'s "iss" would match', { AUTH_JWT_ISSUER: 'https://id.example.com/realms/plants ', AUTH_JWT_AUDIENCE: 'plantstore' },
      'AUTH_JWT_ISSUER must be the identity provider\'s issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got "https://id.example.com/realms/plants "'],
    ['a malformed key set URL', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_JWKS_URL: 'https//id.example.com/certs' },
      'AUTH_JWT_JWKS_URL must be an http or https URL of the provider\'s key set, got "https//id.example.com/certs"'],
    ['HS256', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_ALGORITHMS: 'RS256,HS256' },
      'AUTH_JWT_ALGORITHMS must not allow "HS256": only the provider\'s public-key algorithms are accepted ' +
      '(RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519)'],
    ['hs512 in lower case', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_ALGORITHMS: 'hs512' },
      'AUTH_JWT_ALGORITHMS must not allow "hs512": only the provider\'s public-key algorithms are accepted ' +
      '(RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519)'],
    ['none', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_ALGORITHMS: 'none' },
      'AUTH_JWT_ALGORITHMS must not allow "none": only the provider\'s public-key algorithms are accepted ' +
      '(RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519)'],
    ['an unknown algorithm', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_ALGORITHMS: 'RS256,RSA-OAEP' },
      'AUTH_JWT_ALGORITHMS must be comma-separated names of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519, got "RS256,RSA-OAEP"'],
    ['a tolerance over five minutes', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_CLOCK_TOLERANCE_S: '301' },
      'AUTH_JWT_CLOCK_TOLERANCE_S must be a whole number from 0 to 300, got "301"'],
    ['a scope claim with spaces around it', { AUTH_JWT_ISSUER: ISSUER, AUTH_JWT_AUDIENCE: 'plantstore', AUTH_JWT_SCOPE_CLAIM: ' scp' },
      'AUTH_JWT_SCOPE_CLAIM must be a claim name without surrounding spaces, got " scp"']
  ])('refuse %s with one line naming the variable', (_case, env, line) => {
    expect(problemsOf(env)).toEqual([line])
  })

  it('report every bad AUTH_JWT_* variable of a start at once', () => {
    expect(problemsOf({ AUTH_JWT_ISSUER: 'nope', AUTH_JWT_ALGORITHMS: 'none', AUTH_JWT_CLOCK_TOLERANCE_S: '-1' })).toEqual([
      'AUTH_JWT_ISSUER must be the identity provider\'s issuer URL, such as https://id.example.com/realms/plants, without a query, fragment or credentials, got "nope"',
      'AUTH_JWT_AUDIENCE must name the audience (comma-separated, one of which a token\'s "aud" must contain) when AUTH_JWT_ISSUER is set: ' +
      'without it a token the provider issued for any other service would be accepted',
      'AUTH_JWT_ALGORITHMS must not allow "none": only the provider\'s public-key algorithms are accepted ' +
      '(RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519)',
      'AUTH_JWT_CLOCK_TOLERANCE_S must be a whole number from 0 to 300, got "-1"'
    ])
  })
})
