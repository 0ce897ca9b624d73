import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import type { OtlpProtocol } from '../config.js'
import type { PlantStore, StoreObserver } from '../store/plant-store.js'
import { SERVICE_VERSION } from '../version.js'
import type { DeliveryTracer } from '../webhooks/dispatcher.js'
import type { TraceIds } from './request-spans.js'

/**
 * OpenTelemetry tracing, on when an OTLP endpoint is configured (`config.tracing`). Only `startTracing`
 * loads the SDK, @fastify/otel and the modules that make spans: with tracing off none of them is
 * imported, and the app registers, wraps and checks nothing per request.
 *
 * The SDK reads its standard variables itself: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT,
 * _COMPRESSION, OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, and
 * @fastify/otel OTEL_FASTIFY_IGNORE_PATHS.
 */
export interface Tracing {
  /** The OTLP encoding spans are exported in. */
  readonly protocol: OtlpProtocol
  /**
   * A span per request, named by its route template ("GET /plants/:id"), child of the caller's span
   * when the request carries a W3C `traceparent`. Registered before every other plugin and route.
   */
  readonly requestSpans: FastifyPluginAsync
  /** The store with a span per call ("store create"), child of the request's span. */
  readonly traceStore: (store: PlantStore) => PlantStore
  /**
   * Makes a span per group-commit batch ("store write batch"), linked to the store calls it committed,
   * each of which links back to it.
   */
  readonly storeObserver: StoreObserver
  /** A span per webhook delivery attempt, whose context the receiver gets in `traceparent`. */
  readonly deliveryTracer: DeliveryTracer
  /** Ends the span of a request whose answer was hijacked (a change stream), once that answer has closed. */
  readonly endHijackedRequestSpan: (request: FastifyRequest, statusCode: number) => void
  /** The ids of a request's span, for its log line; undefined for a request that has none. */
  readonly requestTraceIds: (request: FastifyRequest) => TraceIds | undefined
  /** pino's `mixin`: `trace_id` and `span_id` of the span active where a line is logged. */
  readonly logMixin: () => object
  /** Exports the spans not sent yet (waiting at most SHUTDOWN_EXPORT_MS) and stops tracing. */
  shutdown (): Promise<void>
}

/** What a stop waits for the last spans to be exported: the graceful stop has 8 s for everything. */
const SHUTDOWN_EXPORT_MS = 2000

/** Starts the SDK: a batch span processor exporting over OTLP/HTTP, configured by the OTEL_* variables. */
export async function startTracing (protocol: OtlpProtocol): Promise<Tracing> {
  const [
    api, { NodeTracerProvider, BatchSpanProcessor }, exporter, resources, semconv, { FastifyOtelInstrumentation },
    requestSpans, storeSpans, { deliverySpans }
  ] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-node'),
    protocol === 'http/json' ? import('@opentelemetry/exporter-trace-otlp-http') : import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/semantic-conventions'),
    import('@fastify/otel'),
    import('./request-spans.js'),
    import('./store-spans.js'),
    import('./delivery-spans.js')
  ])
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over these defaults.
  const resource = resources.defaultResource()
    .merge(resources.resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: 'plantstore', [semconv.ATTR_SERVICE_VERSION]: SERVICE_VERSION }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new exporter.OTLPTraceExporter())]
  })
  // The W3C trace-context and baggage propagators and the AsyncLocalStorage context manager.
  provider.register()
  const tracer = provider.getTracer('plantstore', SERVICE_VERSION)
  const instrumentation = new FastifyOtelInstrumentation({
    // One span per request: no span per hook or handler.
    instrumentHooks: false,
    instrumentHandler: false,
    requestHook: requestSpans.nameRequestSpan
  })
  instrumentation.setTracerProvider(provider)

  return {
    protocol,
    requestSpans: requestSpans.requestSpans(instrumentation),
    traceStore: (store) => storeSpans.tracedStore(store, tracer),
    storeObserver: storeSpans.writeBatchSpans(tracer),
    deliveryTracer: deliverySpans(tracer),
    endHijackedRequestSpan: requestSpans.endHijackedRequestSpan,
    requestTraceIds: requestSpans.requestTraceIds,
    logMixin: requestSpans.activeTraceIds,
    shutdown: async () => {
      instrumentation.disable()
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        provider.shutdown().catch(() => {}),
        new Promise((resolve) => { timer = setTimeout(resolve, SHUTDOWN_EXPORT_MS) })
      ])
      clearTimeout(timer)
      // So a later start (tests build many apps in one process) registers its own.
      api.trace.disable()
      api.context.disable()
      api.propagation.disable()
    }
  }
}
