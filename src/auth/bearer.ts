import bearerAuthPlugin from '@fastify/bearer-auth'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { insufficientScope, invalidToken, missingCredentials } from '../errors.js'
import { grants } from './scope-sets.js'
import type { Scope } from '../store/scopes.js'
import type { AccessTokenRegistry, TokenIdentity } from './token-registry.js'
import { isB64Token } from './tokens.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The token that authenticated the request; null before authentication and on open routes. */
    accessToken: TokenIdentity | null
  }
}

export interface BearerAuthOptions {
  readonly tokens: Pick<AccessTokenRegistry, 'identify'>
  /** The scope a request with this method needs in this scope; undefined for "any valid token". */
  readonly requiredScope: (method: string) => Scope | undefined
}

/**
 * Guards every route of the scope that registers it (it is not encapsulated) with a Bearer token and
 * the scope the method needs, in `onRequest`, so a request without them is refused before its body is
 * read, parsed or validated, and before anything else in the scope (rate limit, 404, 405) answers.
 *
 * @fastify/bearer-auth parses the header (scheme case-insensitively in its `rfc6749` mode, token
 * trimmed) and calls `auth`; it reports a foreign scheme and a bad token with the same error, so
 * the scheme is told apart here to pick the RFC 6750 challenge: none for "no Bearer credentials at
 * all", `error="invalid_token"` for a Bearer credential that is missing, malformed, unknown, expired
 * or revoked, and `error="insufficient_scope"` (403) for a valid token without the scope.
 */
export const bearerAuth = fp(async function bearerAuth (app: FastifyInstance, options: BearerAuthOptions) {
  const { tokens, requiredScope } = options
  await app.register(bearerAuthPlugin, {
    keys: [],
    addHook: false,
    specCompliance: 'rfc6749',
    verifyErrorLogLevel: 'debug',
    auth: (token: string, request: FastifyRequest) => {
      const identity = isB64Token(token) ? tokens.identify(token) : undefined
      if (identity === undefined) return false
      request.accessToken = identity
      return true
    }
  })

  const verifyBearerAuth = app.verifyBearerAuth
  if (verifyBearerAuth === undefined) throw new Error('@fastify/bearer-auth did not decorate verifyBearerAuth')

  app.addHook('onRequest', (request, reply, done) => {
    if (!presentsBearerScheme(request)) {
      done(missingCredentials())
      return
    }
    verifyBearerAuth(request, reply, (error?: Error) => {
      if (error !== undefined || request.accessToken === null) {
        done(invalidToken())
        return
      }
      const scope = requiredScope(request.method)
      done(scope === undefined || grants(request.accessToken.scopes, scope) ? undefined : insufficientScope(scope))
    })
  })
}, { name: 'bearer-auth-guard' })

function presentsBearerScheme (request: FastifyRequest): boolean {
  const header = request.headers.authorization
  if (header === undefined) return false
  const schemeEnd = header.indexOf(' ')
  const scheme = schemeEnd === -1 ? header : header.slice(0, schemeEnd)
  return scheme.toLowerCase() === 'bearer'
}
