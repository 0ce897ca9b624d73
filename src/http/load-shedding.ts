import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { overloaded } from '../errors.js'

const START_UP_GRACE_MS = 2000

/**
 * Sheds load when the event loop falls behind: while its delay (sampled every 250 ms) is above the
 * limit, new requests get a quick 503 with `Retry-After` instead of queueing behind the backlog, so
 * accepted requests keep a bounded latency. Liveness is never shed: an overloaded process is alive.
 */
export const loadShedding = fp(async function loadShedding (app: FastifyInstance, options: { maxEventLoopDelayMs: number }) {
  if (options.maxEventLoopDelayMs === 0) return
  // The first samples measure start-up work (compiling, migrating), which is not overload.
  const judgedFrom = performance.now() + START_UP_GRACE_MS
  await app.register(underPressure, {
    maxEventLoopDelay: options.maxEventLoopDelayMs,
    sampleInterval: 250,
    pressureHandler: (request) => request.url === '/healthz' || performance.now() < judgedFrom
      ? undefined
      : Promise.reject(overloaded())
  })
}, { name: 'load-shedding' })
