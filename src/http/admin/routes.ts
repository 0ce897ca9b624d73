import type { FastifyInstance } from 'fastify'
import { bearerAuth } from '../../auth/bearer.js'
import { perTokenRateLimit } from '../../auth/rate-limit.js'
import type { AccessTokenRegistry } from '../../auth/token-registry.js'
import { answerUnmatched } from '../method-not-allowed.js'
import { exportRoutes, type ExportRoutesOptions } from './export.js'
import { accessTokenRoutes } from './tokens.js'
import { webhookRoutes, type WebhookRoutesOptions } from './webhooks.js'

export interface AdminRoutesOptions {
  readonly accessTokens: AccessTokenRegistry
  readonly rateLimitPerMinute: number
  readonly webhooks: WebhookRoutesOptions
  readonly export: ExportRoutesOptions
}

/**
 * Everything under `/admin`, registered under that prefix: a valid token first (401), then the `admin`
 * scope (403), for every request of the scope, its 404s and 405s included.
 */
export async function adminRoutes (app: FastifyInstance, options: AdminRoutesOptions): Promise<void> {
  await app.register(bearerAuth, { requiredScope: () => 'admin' })
  await app.register(perTokenRateLimit, { perMinute: options.rateLimitPerMinute })
  app.setNotFoundHandler(answerUnmatched)
  await app.register(accessTokenRoutes, { prefix: '/tokens', accessTokens: options.accessTokens })
  await app.register(webhookRoutes, { prefix: '/webhooks', ...options.webhooks })
  await app.register(exportRoutes, { prefix: '/export', ...options.export })
}
