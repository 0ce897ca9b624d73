import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { tooManyRequests } from '../errors.js'

/**
 * Per-token rate limiting for the scope that registers it, after authentication. Requests are counted
 * under their token's id, so the limiter neither parses the header again nor holds a token or a
 * digest, and a token keeps its count across reloads of the token list.
 */
export const perTokenRateLimit = fp(async function perTokenRateLimit (app: FastifyInstance, options: { perMinute: number }) {
  if (options.perMinute === 0) return
  await app.register(rateLimit, {
    max: options.perMinute,
    timeWindow: 60_000,
    hook: 'onRequest',
    keyGenerator: (request: FastifyRequest) => `token:${request.accessToken?.id ?? ''}`,
    errorResponseBuilder: (_request, context) => tooManyRequests(Math.max(1, Math.ceil(context.ttl / 1000)))
  })
}, { name: 'per-token-rate-limit', dependencies: ['bearer-auth-guard'] })
