import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import type { HistogramSeries } from './fast-histogram.js'
import type { ServiceMetrics } from './metrics.js'

/** The `route` label of requests no route matched (404, 405 on known paths, CORS preflights): never the raw URL. */
const UNMATCHED_ROUTE = 'unmatched'

/**
 * Observes every answered request in `http_request_duration_seconds`. Each route gets its own
 * `onResponse` hook that knows its template, so no request looks its route up; requests that no route
 * matched are counted under one `route` value, so probes of random paths cannot grow the label set.
 */
export const httpMetrics = fp(async function httpMetrics (app: FastifyInstance, options: { metrics: ServiceMetrics }) {
  const { requestDuration } = options.metrics
  const observerFor = (route: string) => {
    const byMethod = new Map<string, Map<number, HistogramSeries>>()
    return (request: FastifyRequest, reply: FastifyReply) => {
      let byStatus = byMethod.get(request.method)
      if (byStatus === undefined) {
        byStatus = new Map()
        byMethod.set(request.method, byStatus)
      }
      let series = byStatus.get(reply.statusCode)
      if (series === undefined) {
        series = requestDuration.series(request.method, route, reply.statusCode)
        byStatus.set(reply.statusCode, series)
      }
      series.observe(reply.elapsedTime / 1000)
    }
  }

  const observeListing = (request: FastifyRequest, reply: FastifyReply) => {
    const listing = request.plantListing
    if (listing === null) return
    options.metrics.plantListDuration.series(listing.sort, String(listing.page.q !== undefined), String(listing.counted))
      .observe(reply.elapsedTime / 1000)
  }

  // Counted per operation, so that a batch of a thousand counts as the thousand writes it is.
  const countBatch = (request: FastifyRequest) => {
    const batch = request.plantBatch
    if (batch === null) return
    for (const [method, operations] of Object.entries(batch.methods)) {
      options.metrics.batchOperations.inc({ method, applied: String(batch.applied) }, operations)
    }
  }

  app.addHook('onRoute', (route) => {
    const hooks = route.onResponse === undefined ? [] : Array.isArray(route.onResponse) ? route.onResponse : [route.onResponse]
    const observe = observerFor(route.url)
    route.onResponse = [...hooks, function measure (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) {
      // A change stream's lifetime is no request's duration: plantstore_change_streams_* count streams.
      if (request.changeStream === null) observe(request, reply)
      observeListing(request, reply)
      countBatch(request)
      done()
    }]
  })

  const observeUnmatched = observerFor(UNMATCHED_ROUTE)
  app.addHook('onResponse', (request, reply, done) => {
    if (request.is404) observeUnmatched(request, reply)
    done()
  })
}, { name: 'http-metrics' })
