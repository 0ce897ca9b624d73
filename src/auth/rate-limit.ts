import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { tooManyRequests } from '../errors.js'
import { digestToken } from './tokens.js'

/**
 * Per-token rate limiting for the scope that registers it, after authentication. Requests are counted
 * under the SHA-256 digest of their token, so the limiter's memory never holds a token itself.
 */
export const perTokenRateLimit = fp(async function perTokenRateLimit (app: FastifyInstance, options: { perMinute: number }) {
  if (options.perMinute === 0) return
  await app.register(rateLimit, {
    max: options.perMinute,
    timeWindow: 60_000,
    hook: 'onRequest',
    keyGenerator: tokenKey,
    errorResponseBuilder: (_request, context) => tooManyRequests(Math.max(1, Math.ceil(context.ttl / 1000)))
  })
}, { name: 'per-token-rate-limit' })

function tokenKey (request: FastifyRequest): string {
  const header = request.headers.authorization ?? ''
  return digestToken(header.slice(header.indexOf(' ') + 1).trim()).toString('base64')
}
