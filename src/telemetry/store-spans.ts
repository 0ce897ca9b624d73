import { context, SpanStatusCode, trace, type Link, type Span, type Tracer } from '@opentelemetry/api'
import type { PlantStore, StoreObserver } from '../store/plant-store.js'
import { wrappedStore } from './wrapped-store.js'

export const ATTR_STORE_BACKEND = 'plantstore.store.backend'
export const ATTR_STORE_OUTCOME = 'plantstore.store.outcome'
export const ATTR_BATCH_SIZE = 'plantstore.store.batch.size'

/**
 * The store with a span per call, "store <operation>", in the caller's trace (the request's span is
 * active in its handler). A write's outcome (created, replayed, conflict, stale, …) is an attribute.
 */
export function tracedStore (store: PlantStore, tracer: Tracer): PlantStore {
  const attributes = { [ATTR_STORE_BACKEND]: store.backend }
  return wrappedStore(store, (operation, call) => {
    const name = `store ${operation}`
    return (...args) => {
      const parent = context.active()
      const span = tracer.startSpan(name, { attributes }, parent)
      return context.with(trace.setSpan(parent, span), call, undefined, ...args).then(
        (result) => {
          const outcome = (result as { status?: unknown } | undefined)?.status
          if (typeof outcome === 'string') span.setAttribute(ATTR_STORE_OUTCOME, outcome)
          span.end()
          return result
        },
        (error: unknown) => {
          endFailed(span, error)
          throw error
        })
    }
  })
}

/**
 * A span per group-commit transaction, "store write batch": the root of a trace of its own (it serves
 * many requests, so it belongs to none of them), linked to the store call of every write it committed,
 * and each of those calls links back to it. A batch none of whose writes was traced makes no span.
 */
export function writeBatchSpans (tracer: Tracer): StoreObserver {
  return {
    writeSubmitted: () => trace.getSpan(context.active()),
    writeBatchEnded: (batch) => {
      const served = batch.submitted.filter(isRecordingSpan)
      if (served.length === 0) return
      // Times on performance.now()'s clock: the SDK converts them as it does its own.
      const span = tracer.startSpan('store write batch', {
        root: true,
        startTime: batch.startedAt,
        attributes: { [ATTR_STORE_BACKEND]: batch.backend, [ATTR_BATCH_SIZE]: batch.size },
        links: served.map((write): Link => ({ context: write.spanContext() }))
      })
      if (!batch.committed) span.setStatus({ code: SpanStatusCode.ERROR, message: 'the transaction did not commit' })
      span.end(batch.startedAt + batch.seconds * 1000)
      const toBatch: Link = { context: span.spanContext() }
      for (const write of served) write.addLink(toBatch)
    }
  }
}

function isRecordingSpan (value: unknown): value is Span {
  return typeof (value as Partial<Span> | undefined)?.isRecording === 'function' && (value as Span).isRecording()
}

export function endFailed (span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error)
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
  span.end()
}
