import bearerAuthPlugin from '@fastify/bearer-auth'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { insufficientScope, invalidToken, missingCredentials, tooManyFailedAuthentications, type PlantstoreError } from '../errors.js'
import type { FailedAuthenticationLimit } from './failed-authentication-limit.js'
import { mayBeJwt, type JwtAccessTokens } from './jwt/jwt-access-tokens.js'
import { grants } from './scope-sets.js'
import type { Scope } from '../store/scopes.js'
import { UNNAMED_WRITER } from '../store/change-log.js'
import type { AccessTokenRegistry, TokenIdentity } from './token-registry.js'
import { isB64Token } from './tokens.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The token that authenticated the request; null before authentication and on open routes. */
    accessToken: TokenIdentity | null
  }
}

/**
 * Who a request's writes are recorded as made by in the change log: its token's name (`jwt:<sub>` for an
 * identity provider's token). Every write route is guarded, so the fallback is never met there.
 */
export function writerOf (request: FastifyRequest): string {
  return request.accessToken?.name ?? UNNAMED_WRITER
}

export interface BearerAuthenticationOptions {
  readonly tokens: Pick<AccessTokenRegistry, 'identify'>
  /** JWT access tokens from the identity provider, when configured: tried for a JWT no service token matches. */
  readonly jwtAccessTokens?: Pick<JwtAccessTokens, 'identify' | 'remembered'> | undefined
  /** Counts each address's 401s and refuses it for a while after too many. */
  readonly failureLimit: FailedAuthenticationLimit
  /**
   * What an authenticated request gets instead of being served for its target alone (the HTTP layer's
   * 400 of an undecodable path, 414 of an overlong segment), judged only after its credentials and scope.
   */
  readonly targetRefusal: (request: FastifyRequest) => PlantstoreError | undefined
}

/** Answers with the error to send, or with nothing when the request may go on. */
export type AuthenticationDone = (error?: PlantstoreError) => void

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Decides whether a request may go on: first whether its address has failed too often (429, before
     * its credentials are even looked at, so a limited address learns nothing about its tokens), then
     * its Bearer token (401, counted against the address), then `scope` (403; undefined: any valid
     * token), then its target (400 for a path that cannot be decoded, 414 for an overlong segment).
     */
    authenticate: (request: FastifyRequest, reply: FastifyReply, scope: Scope | undefined, done: AuthenticationDone) => void
  }
}

/**
 * Decorates the app with `authenticate`, shared by every guarded scope.
 *
 * @fastify/bearer-auth parses the header (scheme case-insensitively in its `rfc6749` mode, token
 * trimmed) and calls `auth`; it reports a foreign scheme and a bad token with the same error, so
 * the scheme is told apart here to pick the RFC 6750 challenge: none for "no Bearer credentials at
 * all", `error="invalid_token"` for a Bearer credential that is missing, malformed, unknown, expired
 * or revoked, and `error="insufficient_scope"` (403) for a valid token without the scope.
 */
export const bearerAuthentication = fp(async function bearerAuthentication (app: FastifyInstance, options: BearerAuthenticationOptions) {
  const { tokens, jwtAccessTokens, failureLimit, targetRefusal } = options
  const accept = (request: FastifyRequest, identity: TokenIdentity | undefined): boolean => {
    if (identity === undefined) return false
    request.accessToken = identity
    return true
  }
  await app.register(bearerAuthPlugin, {
    keys: [],
    addHook: false,
    specCompliance: 'rfc6749',
    verifyErrorLogLevel: 'debug',
    auth: (token: string, request: FastifyRequest) => {
      // A JWT verified before is found by its digest before anything else, so a client repeating its JWT
      // pays what a service token costs. It is exactly the token that was verified, so its syntax holds,
      // and no service token is also a valid JWT: the service tokens' answers stay as they were.
      const remembered = jwtAccessTokens !== undefined && mayBeJwt(token) ? jwtAccessTokens.remembered(token) : undefined
      if (remembered !== undefined) return accept(request, remembered)
      if (!isB64Token(token)) return false
      const identity = tokens.identify(token)
      // Any dotted token that is no service token goes to the JWT verifier, which says why it refuses it.
      if (identity !== undefined || jwtAccessTokens === undefined || !token.includes('.')) return accept(request, identity)
      const verified = jwtAccessTokens.identify(token, (reason) => { request.log.debug({ reason }, 'JWT access token refused') })
      return verified instanceof Promise ? verified.then((jwtIdentity) => accept(request, jwtIdentity)) : accept(request, verified)
    }
  })

  const verifyBearerAuth = app.verifyBearerAuth
  if (verifyBearerAuth === undefined) throw new Error('@fastify/bearer-auth did not decorate verifyBearerAuth')

  function refuse (request: FastifyRequest, error: PlantstoreError, done: AuthenticationDone): void {
    failureLimit.recordFailure(request.ip)
    done(error)
  }

  app.decorate('authenticate', function authenticate (request: FastifyRequest, reply: FastifyReply, scope: Scope | undefined, done: AuthenticationDone) {
    const retryAfter = failureLimit.retryAfterSeconds(request.ip)
    if (retryAfter !== undefined) {
      done(tooManyFailedAuthentications(retryAfter))
      return
    }
    if (!presentsBearerScheme(request)) {
      refuse(request, missingCredentials(), done)
      return
    }
    verifyBearerAuth(request, reply, (error?: Error) => {
      if (error !== undefined || request.accessToken === null) {
        refuse(request, invalidToken(), done)
        return
      }
      if (scope !== undefined && !grants(request.accessToken.scopes, scope)) {
        done(insufficientScope(scope))
        return
      }
      done(targetRefusal(request))
    })
  })
}, { name: 'bearer-authentication' })

export interface BearerAuthOptions {
  /** The scope a request with this method needs in this scope; undefined for "any valid token". */
  readonly requiredScope: (method: string) => Scope | undefined
}

/**
 * Guards every route of the scope that registers it (it is not encapsulated) with `authenticate`, in
 * `onRequest`, so a request without a valid token and the scope its method needs is refused before
 * its body is read, parsed or validated, and before anything else in the scope (rate limit, 404, 405)
 * answers.
 */
export const bearerAuth = fp(async function bearerAuth (app: FastifyInstance, options: BearerAuthOptions) {
  const { requiredScope } = options
  app.addHook('onRequest', (request, reply, done) => {
    app.authenticate(request, reply, requiredScope(request.method), (error) => { done(error) })
  })
}, { name: 'bearer-auth-guard', dependencies: ['bearer-authentication'] })

function presentsBearerScheme (request: FastifyRequest): boolean {
  const header = request.headers.authorization
  if (header === undefined) return false
  const schemeEnd = header.indexOf(' ')
  const scheme = schemeEnd === -1 ? header : header.slice(0, schemeEnd)
  return scheme.toLowerCase() === 'bearer'
}
