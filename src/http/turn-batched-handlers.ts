import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export interface TurnBatchedHandlersOptions {
  /** Called with the size of each batch of handlers: for tests and metrics. */
  readonly onBatch?: (size: number) => void
}

/**
 * Runs route handlers in batches at the end of the event-loop turn that parsed their requests: the
 * requests whose bytes arrived together are parsed together, then handled and answered together. The
 * same code run back to back stays in the CPU's caches, the kernel's included, and under load a request
 * costs about half the CPU it costs when each is handled and answered the moment it is parsed
 * (bench/results/2026-11-23-1052-fixed-cost.md). That is also why group commit made durable POSTs cheap: it answers a whole batch
 * in one turn. A lone request waits only for the rest of its turn.
 *
 * Requests refused before their handler (authentication, validation, load shedding) are answered at
 * once, as before.
 */
export const turnBatchedHandlers = fp(async function turnBatchedHandlers (app: FastifyInstance, options: TurnBatchedHandlersOptions) {
  let waiting: Array<() => void> = []
  const runBatch = () => {
    const batch = waiting
    waiting = []
    options.onBatch?.(batch.length)
    // Each continues into Fastify's handler call, which catches what the handler throws or rejects with.
    for (const proceed of batch) proceed()
  }
  app.addHook('preHandler', (_request, _reply, done) => {
    if (waiting.push(done) === 1) setImmediate(runBatch)
  })
}, { name: 'turn-batched-handlers' })
