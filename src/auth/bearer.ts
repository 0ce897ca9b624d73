import bearerAuthPlugin from '@fastify/bearer-auth'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { invalidToken, missingCredentials } from '../errors.js'
import { isB64Token, type AccessTokens } from './tokens.js'

/**
 * Guards every route of the scope that registers it (it is not encapsulated) with a Bearer token, in `onRequest`, so an
 * unauthenticated request is refused before its body is read, parsed or validated.
 *
 * @fastify/bearer-auth parses the header (scheme case-insensitively in its `rfc6749` mode, token
 * trimmed) and calls `accepts`; it reports a foreign scheme and a bad token with the same error, so
 * the scheme is told apart here to pick the RFC 6750 challenge: none for "no Bearer credentials at
 * all", `error="invalid_token"` for a Bearer credential that is missing, malformed or unknown.
 */
declare module 'fastify' {
  interface FastifyRequest {
    /** Which accepted token authenticated the request (see `AccessTokens.identify`); -1 before that. */
    accessTokenIdentity: number
  }
}

export const bearerAuth = fp(async function bearerAuth (app: FastifyInstance, options: { accessTokens: AccessTokens }) {
  const { accessTokens } = options
  app.decorateRequest('accessTokenIdentity', -1)
  await app.register(bearerAuthPlugin, {
    keys: [],
    addHook: false,
    specCompliance: 'rfc6749',
    verifyErrorLogLevel: 'debug',
    auth: (token: string, request: FastifyRequest) => {
      const identity = isB64Token(token) ? accessTokens.identify(token) : undefined
      if (identity === undefined) return false
      request.accessTokenIdentity = identity
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
      done(error === undefined ? undefined : invalidToken())
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
