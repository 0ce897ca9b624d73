import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { methodNotAllowed, routeNotFound } from '../errors.js'
import { pathOf } from './query-string.js'
import { sendError } from './send-error.js'

/** Which methods each known path answers, learned from the routes as they are added. */
export class KnownRoutes {
  private readonly routes = new Map<string, { pattern: RegExp, methods: Set<string> }>()

  add (url: string, methods: readonly string[]): void {
    let route = this.routes.get(url)
    if (route === undefined) {
      route = { pattern: patternOf(url), methods: new Set() }
      this.routes.set(url, route)
    }
    for (const method of methods) route.methods.add(method)
  }

  /** The methods the path answers, sorted, or undefined when no route has this path. */
  allowedMethods (path: string): string[] | undefined {
    for (const { pattern, methods } of this.routes.values()) {
      if (pattern.test(path)) return [...methods].sort()
    }
    return undefined
  }
}

function patternOf (url: string): RegExp {
  const escaped = url.replace(/[.+?^${}()|[\]\\]/g, '\\$&')
  return new RegExp(`^${escaped.replace(/:[^/]+/g, '[^/]+').replace(/\*/g, '.*')}$`)
}

declare module 'fastify' {
  interface FastifyInstance {
    knownRoutes: KnownRoutes
  }
  interface FastifyContextConfig {
    /**
     * A route that only answers methods a path lacks (405), where the router would otherwise take another
     * route's: its methods are not the path's.
     */
    answersUnmatched?: boolean
  }
}

/** Records every route's path and methods, so an unmatched request can be told 404 from 405. */
export const knownRoutes = fp(async function knownRoutes (app: FastifyInstance) {
  const routes = new KnownRoutes()
  app.decorate('knownRoutes', routes)
  app.addHook('onRoute', (route) => {
    if (route.config?.answersUnmatched === true) return
    routes.add(route.url, Array.isArray(route.method) ? route.method : [route.method])
  })
}, { name: 'known-routes' })

/**
 * The not-found handler: 405 with `Allow` when the path exists with other methods, 404 otherwise.
 * Registered in a scope, it runs that scope's hooks first (so `/plants` authenticates before a 405).
 */
export function answerUnmatched (request: FastifyRequest, reply: FastifyReply): void {
  const path = pathOf(request.url)
  const allowed = request.server.knownRoutes.allowedMethods(path)
  sendError(reply, allowed === undefined
    ? routeNotFound(request.method, path)
    : methodNotAllowed(request.method, path, allowed))
}
