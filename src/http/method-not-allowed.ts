import type { FastifyInstance, HTTPMethods } from 'fastify'
import { methodNotAllowed } from '../errors.js'

const STANDARD_METHODS: readonly HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT']

/**
 * Answers 405 with an `Allow` header for every standard method `url` does not support, instead of the
 * router's 404. Registered in the route's own scope, so the scope's hooks (authentication) run first.
 */
export function allowOnly (app: FastifyInstance, url: string, allowed: readonly HTTPMethods[]): void {
  const withHead: readonly HTTPMethods[] = allowed.includes('GET') ? [...allowed, 'HEAD'] : allowed
  app.route({
    method: STANDARD_METHODS.filter((method) => !withHead.includes(method)),
    url,
    schema: { hide: true },
    handler: async (request) => {
      throw methodNotAllowed(request.method, url, withHead)
    }
  })
}
