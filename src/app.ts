import Fastify, { type FastifyInstance } from 'fastify'
import type { DestinationStream } from 'pino'
import { bearerAuthentication } from './auth/bearer.js'
import { FailedAuthenticationLimit } from './auth/failed-authentication-limit.js'
import type { JwtAccessTokens } from './auth/jwt/jwt-access-tokens.js'
import type { AccessTokenRegistry } from './auth/token-registry.js'
import { DEFAULT_CHANGES_CONFIG, DEFAULT_WEBHOOK_CONFIG, type ChangesConfig, type Config, type WebhookConfig } from './config.js'
import { shuttingDown } from './errors.js'
import { adminRoutes } from './http/admin/routes.js'
import { docsRoutes, openApiDocument } from './http/docs.js'
import { cors } from './http/cors.js'
import { clientError, errorEnvelope, frameworkError } from './http/error-envelope.js'
import { healthRoutes } from './http/health.js'
import { jsonBody } from './http/json-body.js'
import { loadShedding } from './http/load-shedding.js'
import { lingeringClose } from './http/lingering-close.js'
import { knownRoutes } from './http/method-not-allowed.js'
import { bufferedStandardOutput, CompletedRequestLog, lazyRequestLogger, logRedaction } from './http/request-log.js'
import { parseQueryString } from './http/query-string.js'
import { requestIdFor, requestIdHeader } from './http/request-id.js'
import { requestTargets, ROUTER_MAX_PARAM_LENGTH, routableUrl, targetRefusal } from './http/request-targets.js'
import { pipelinedWrites } from './http/pipelined-writes.js'
import { plantsRoutes } from './http/plants.js'
import { sendError } from './http/send-error.js'
import { turnBatchedHandlers } from './http/turn-batched-handlers.js'
import { validation } from './http/validation.js'
import { ChangeStreams } from './http/change-streams.js'
import { ChangeRetention } from './store/change-retention.js'
import { httpMetrics } from './telemetry/http-metrics.js'
import { measuredStore, ServiceMetrics } from './telemetry/metrics.js'
import { bothStoreObservers } from './telemetry/store-observers.js'
import type { Tracing } from './telemetry/tracing.js'
import type { PlantStore } from './store/plant-store.js'
import { SERVICE_VERSION } from './version.js'
import { WebhookDispatcher } from './webhooks/dispatcher.js'
import { SecretBox } from './webhooks/secrets.js'

export interface ServerTimeouts {
  /** A client has this long to send its request headers: slow-header clients cannot hold sockets for long. */
  readonly headersMs: number
  /** ...and this long for the whole request, body included. */
  readonly requestMs: number
  /** Longer than the 60 s idle timeout of common load balancers, so they close idle connections first. */
  readonly keepAliveMs: number
}

/** BATCH_BODY_LIMIT's default: 1 MiB. */
export const DEFAULT_BATCH_BODY_LIMIT = 1024 * 1024

export const DEFAULT_TIMEOUTS: ServerTimeouts = { headersMs: 10_000, requestMs: 30_000, keepAliveMs: 65_000 }

export type AppConfig = Pick<Config, 'bodyLimit' | 'logLevel' | 'prettyLogs'> &
  Partial<Pick<Config, 'batchBodyLimit' | 'rateLimitPerMinute' | 'authFailureLimitPerMinute' | 'maxEventLoopDelayMs' | 'maxInFlightRequests' | 'corsOrigins' | 'trustProxy'>> & {
    readonly timeouts?: ServerTimeouts
    /** DEFAULT_WEBHOOK_CONFIG when absent; `pollMs` is how often an idle dispatcher looks for due events. */
    readonly webhooks?: WebhookConfig & { readonly pollMs?: number }
    /**
     * DEFAULT_CHANGES_CONFIG when absent. For tests only: `keepAliveMs`, how long an idle stream waits for its
     * comment line, and `pollMs`, how often the streams' follower reads the log without a wake.
     */
    readonly changes?: ChangesConfig & { readonly keepAliveMs?: number, readonly pollMs?: number }
    /** Whether to collect metrics (`app.metrics`; server.ts serves them on METRICS_PORT). Off when absent. */
    readonly metrics?: boolean
  }

/** An idle dispatcher looks this often, so an event's first attempt follows its commit within 2 s on any instance. */
const WEBHOOK_POLL_MS = 500

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's metrics, when collected. */
    metrics: ServiceMetrics | null
  }
}

export interface AppDependencies {
  readonly store: PlantStore
  /** The accepted tokens; the app keeps them current while it runs (see `watch`). */
  readonly accessTokens: AccessTokenRegistry
  /**
   * JWT access tokens from the identity provider, when configured: the app fetches its keys before it is
   * ready (a provider that is down delays that by at most the fetch time-out) and stops following them on close.
   */
  readonly jwtAccessTokens?: JwtAccessTokens
  /** Where log lines go; standard output when absent. */
  readonly logStream?: DestinationStream
  /** Spans for requests, store calls and webhook deliveries (server.ts starts it when configured); closing the app stops it. */
  readonly tracing?: Tracing
}

/**
 * Builds the whole service: every Fastify option and every plugin, in boot order. Tests build it with
 * `inject`; `server.ts` builds it and listens. Closing the app closes the store.
 */
export async function buildApp (config: AppConfig, dependencies: AppDependencies): Promise<FastifyInstance> {
  const { accessTokens, jwtAccessTokens, tracing } = dependencies
  const metrics = config.metrics === true ? new ServiceMetrics(dependencies.store, SERVICE_VERSION) : undefined
  // What the routes use; `dependencies.store` itself is closed at the end.
  const measured = metrics === undefined ? dependencies.store : measuredStore(dependencies.store, metrics)
  const store = tracing === undefined ? measured : tracing.traceStore(measured)
  const storeObserver = bothStoreObservers(metrics?.storeObserver, tracing?.storeObserver)
  if (storeObserver !== undefined) store.observe(storeObserver)
  // Buffered asynchronous writes to standard output (unless a terminal wants pretty lines): logging
  // stays off the request's critical path.
  const standardOutput = dependencies.logStream === undefined && !config.prettyLogs ? bufferedStandardOutput() : undefined
  const logStream = dependencies.logStream ?? standardOutput?.stream
  const timeouts = config.timeouts ?? DEFAULT_TIMEOUTS
  const requestLog = new CompletedRequestLog(config.logLevel, logStream, tracing?.requestTraceIds)

  const app = Fastify({
    logger: {
      level: config.logLevel,
      redact: logRedaction,
      ...(tracing === undefined ? {} : { mixin: tracing.logMixin }),
      ...(logStream !== undefined ? { stream: logStream } : { transport: { target: 'pino-pretty' } })
    },
    logController: requestLog,
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustProxy ?? false,
    requestIdHeader: false,
    genReqId: requestIdFor,
    return503OnClosing: false,
    frameworkErrors: frameworkError,
    clientErrorHandler: clientError,
    keepAliveTimeout: timeouts.keepAliveMs,
    requestTimeout: timeouts.requestMs,
    // Checked every second, so the timeouts hold to within a second (Node's default interval is 30 s).
    http: { requireHostHeader: false, connectionsCheckingInterval: 1000 },
    // Every path reaches its route or scope, so authentication comes first; request-targets.ts then
    // refuses an undecodable path (400) or an overlong segment (414).
    rewriteUrl: routableUrl,
    routerOptions: { querystringParser: parseQueryString, maxParamLength: ROUTER_MAX_PARAM_LENGTH }
  })
  app.server.headersTimeout = timeouts.headersMs
  // "Server listening at …" is what launchers and tests wait for: it must not sit in the buffer.
  if (standardOutput !== undefined) app.addHook('onListen', (done) => { standardOutput.flush(); done() })
  // Closing ends once the buffered lines are written, so a line the process writes after it comes last.
  app.addHook('onClose', (_app, done) => {
    requestLog.writePending()
    if (standardOutput === undefined) {
      done()
      return
    }
    standardOutput.stopFlushing()
    standardOutput.flush(done)
  })

  app.decorateRequest('accessToken', null)
  app.decorateRequest('plantListing', null)
  app.decorateRequest('plantBatch', null)
  app.decorateRequest('changeStream', null)
  // Before everything, so a request's span covers every hook. Off: nothing registered.
  if (tracing !== undefined) await app.register(tracing.requestSpans)
  // Before every other hook, so CORS headers are on every answer; and before knownRoutes (see cors.ts). Off: nothing registered.
  const corsOrigins = config.corsOrigins ?? []
  if (corsOrigins === '*' || corsOrigins.length > 0) await app.register(cors, { origins: corsOrigins })
  app.decorate('metrics', metrics ?? null)
  // Early: on a connection whose last answer is written, nothing more is served.
  await app.register(lingeringClose)
  await app.register(knownRoutes)
  if (metrics !== undefined) await app.register(httpMetrics, { metrics })
  await app.register(requestIdHeader)
  await app.register(pipelinedWrites)
  await app.register(errorEnvelope)
  await app.register(requestTargets)
  await app.register(jsonBody)
  await app.register(validation)
  await app.register(openApiDocument, { version: SERVICE_VERSION, jwt: jwtAccessTokens?.settings })

  const changesConfig: NonNullable<AppConfig['changes']> = config.changes ?? DEFAULT_CHANGES_CONFIG
  const changeStreams = new ChangeStreams({
    changes: store.changes,
    retentionMs: changesConfig.retentionMs,
    max: changesConfig.streamsMax,
    keepAliveMs: changesConfig.keepAliveMs,
    pollMs: changesConfig.pollMs,
    logger: app.log,
    observer: metrics?.changeStreamObserver
  })
  const retention = new ChangeRetention(store.changes, changesConfig.retentionMs, app.log)
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
    // A graceful stop never waits for streams: they end now, and their clients resume elsewhere.
    changeStreams.closeAll()
  })
  app.addHook('onRequest', (request, reply, done) => {
    if (closing) {
      sendError(reply, shuttingDown(request.id))
      return
    }
    done()
  })
  // A keep-alive connection whose request finishes during the drain must not stay open: the listener
  // waits for every connection to end before the store can close.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close')
    done(null, payload)
  })
  const webhookConfig = config.webhooks ?? DEFAULT_WEBHOOK_CONFIG
  const secrets = new SecretBox(webhookConfig.secretsKey, webhookConfig.previousSecretsKeys)
  const dispatcher = new WebhookDispatcher(store.webhooks, secrets, { pollMs: WEBHOOK_POLL_MS, ...webhookConfig }, app.log,
    `plantstore/${SERVICE_VERSION} (webhooks)`)
  dispatcher.observer = metrics?.deliveryObserver
  dispatcher.tracer = tracing?.deliveryTracer
  app.addHook('onClose', async () => {
    await dispatcher.stop()
    await retention.stop()
    // Every span has ended now: requests were answered before onClose, deliveries ended with the dispatcher.
    await tracing?.shutdown()
    await accessTokens.stopWatching()
    jwtAccessTokens?.stop()
    await store.close()
  })

  await app.register(loadShedding, {
    maxEventLoopDelayMs: config.maxEventLoopDelayMs ?? 0,
    maxInFlightRequests: config.maxInFlightRequests ?? 0,
    metrics
  })

  await app.register(bearerAuthentication, {
    tokens: accessTokens,
    jwtAccessTokens,
    failureLimit: new FailedAuthenticationLimit(config.authFailureLimitPerMinute ?? 0),
    targetRefusal
  })
  await app.register(turnBatchedHandlers)
  await app.register(healthRoutes, { store })
  await app.register(docsRoutes)
  await app.register(plantsRoutes, {
    prefix: '/plants',
    store,
    rateLimitPerMinute: config.rateLimitPerMinute ?? 0,
    batchBodyLimit: config.batchBodyLimit ?? DEFAULT_BATCH_BODY_LIMIT,
    changes: {
      store,
      streams: changeStreams,
      accessTokens,
      retentionMs: changesConfig.retentionMs,
      streamsMax: changesConfig.streamsMax,
      // Fastify writes the line of a stream whose answer finished (the service ended it), never a span's end.
      streamClosed: (request, reply, finished) => {
        if (!finished) requestLog.requestCompleted(null, request, reply)
        tracing?.endHijackedRequestSpan(request, reply.statusCode)
      }
    }
  })
  await app.register(adminRoutes, {
    prefix: '/admin',
    accessTokens,
    rateLimitPerMinute: config.rateLimitPerMinute ?? 0,
    webhooks: { webhooks: store.webhooks, secrets, allowPrivateNetworks: webhookConfig.allowPrivateNetworks },
    export: { store }
  })

  if (jwtAccessTokens !== undefined) {
    const { issuer } = jwtAccessTokens.settings
    jwtAccessTokens.observer = metrics?.jwtObserver()
    await jwtAccessTokens.start({
      fetchFailed: (reason) => {
        app.log.warn({ issuer }, `cannot fetch the identity provider's keys (${reason}); JWTs signed with keys fetched before keep working, and service tokens are unaffected`)
      },
      fetchRecovered: () => { app.log.info({ issuer }, 'the identity provider\'s keys are fetched again') }
    })
  }
  await app.ready()
  if (webhookConfig.deliver) dispatcher.start()
  retention.start()
  return app
}
