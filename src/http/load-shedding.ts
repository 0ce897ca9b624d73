import type { IncomingMessage, ServerResponse } from 'node:http'
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { overloaded } from '../errors.js'
import { sendError } from './send-error.js'

const START_UP_GRACE_MS = 2000

export type ShedReason = 'in_flight' | 'event_loop'

/** What watches the shedding: the service's metrics, when they are on. */
export interface SheddingObserver {
  /** Where the number of requests in flight is read from. */
  countInFlightWith (read: () => number): void
  requestShed (reason: ShedReason): void
}

export interface LoadSheddingOptions {
  /** Event-loop delay above which new requests are shed; 0 turns this signal off. */
  readonly maxEventLoopDelayMs: number
  /** Requests being answered at once above which new ones are shed; 0 turns this signal off. */
  readonly maxInFlightRequests: number
  /** Told how many requests are in flight (counted even without a limit) and about every shed one. */
  readonly metrics?: SheddingObserver | undefined
}

/**
 * Where a response keeps the function that stops counting its request as in flight. (A property of the
 * response rather than a WeakMap entry per request: every request's entry was an ephemeron for the young
 * generation's collector to trace, a few µs of garbage collection a request.)
 */
const RELEASE = Symbol('in-flight release')
type Releasable = ServerResponse & { [RELEASE]?: (this: ServerResponse) => void }

/**
 * Stops counting the request as in flight: a change stream, open for as long as its client follows, is
 * not load (CHANGES_STREAMS_MAX bounds the streams).
 */
export function leaveInFlight (reply: FastifyReply): void {
  const response = reply.raw as Releasable
  response[RELEASE]?.()
}

/** Liveness, whatever query string it carries. (From the URL: `request.routeOptions` builds an object per call.) */
const isLiveness = (request: FastifyRequest) => request.url.startsWith('/healthz') &&
  (request.url.length === 8 || request.url.charCodeAt(8) === 0x3f)

/**
 * Sheds load with a quick 503 + `Retry-After` instead of letting requests queue behind a backlog, so
 * accepted requests keep a bounded latency. Two signals, either enough:
 * - requests in flight: by Little's law they bound the queueing delay, and they fall the moment the
 *   load does, so recovery is immediate;
 * - event-loop delay (sampled every 250 ms): catches CPU-bound stalls the in-flight count misses.
 * Liveness is never shed: an overloaded process is alive.
 */
export const loadShedding = fp(async function loadShedding (app: FastifyInstance, options: LoadSheddingOptions) {
  const { metrics } = options
  if (options.maxInFlightRequests > 0 || metrics !== undefined) {
    const limit = options.maxInFlightRequests > 0 ? options.maxInFlightRequests : Infinity
    let inFlight = 0
    metrics?.countInFlightWith(() => inFlight)
    app.addHook('onRequest', (request, reply, done) => {
      if (isLiveness(request)) return done()
      if (inFlight >= limit) {
        metrics?.requestShed('in_flight')
        sendError(reply, overloaded(request.id))
        return
      }
      inFlight++
      let released = false
      // The response's 'close' ends a request, also when its client left mid-answer. A pipelined request
      // whose client left while its answer waited behind an earlier one never gets that 'close': its
      // request stream closes as aborted instead. (Plain listeners: each stream closes once.)
      function release (this: IncomingMessage | ServerResponse) {
        if (released || (this === request.raw && !request.raw.aborted)) return
        released = true
        inFlight--
      }
      reply.raw.on('close', release)
      request.raw.on('close', release)
      ;(reply.raw as Releasable)[RELEASE] = release
      done()
    })
  }

  if (options.maxEventLoopDelayMs > 0) {
    // The first samples measure start-up work (compiling, migrating), which is not overload.
    const judgedFrom = performance.now() + START_UP_GRACE_MS
    await app.register(underPressure, {
      maxEventLoopDelay: options.maxEventLoopDelayMs,
      sampleInterval: 250,
      pressureHandler: (request) => {
        if (isLiveness(request) || performance.now() < judgedFrom) return undefined
        metrics?.requestShed('event_loop')
        return Promise.reject(overloaded(request.id))
      }
    })
  }
}, { name: 'load-shedding' })
