import { collectDefaultMetrics, Counter, Gauge, Registry, type GaugeConfiguration } from 'prom-client'
import type { JwtObserver } from '../auth/jwt/jwt-access-tokens.js'
import type { PlantStore, StoreObserver } from '../store/plant-store.js'
import type { DeliveryObserver } from '../webhooks/dispatcher.js'
import { FastHistogram } from './fast-histogram.js'
import { wrappedStore } from './wrapped-store.js'
import type { SheddingObserver, ShedReason } from '../http/load-shedding.js'
import type { ChangeStreamObserver, StreamEnd } from '../http/change-streams.js'

/** Request latency: sub-millisecond answers are the norm here, so the buckets start at 0.5 ms. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
/** How long a scrape waits for the store's ping and backlog before reporting them unknown. */
const SCRAPE_STORE_TIMEOUT_MS = 2000

/**
 * Every metric the service exposes, in one registry per app (tests build many apps in one process).
 * Names follow Prometheus' conventions; the request histogram has fastify-metrics' name and labels, so
 * existing dashboards work. The hot paths (a request, a store call) only add to a FastHistogram's
 * counters; everything that needs a query (store up, webhook backlog, pool use) is read at scrape time.
 */
export class ServiceMetrics implements SheddingObserver {
  readonly registry = new Registry()
  readonly requestDuration = new FastHistogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer a request, by method, route template and status code',
    labelNames: ['method', 'route', 'status_code'],
    buckets: LATENCY_BUCKETS
  })

  readonly storeOperationDuration = new FastHistogram({
    name: 'plantstore_store_operation_duration_seconds',
    help: 'Time a store operation took, as the routes see it (batching included), by operation and backend',
    labelNames: ['operation', 'backend'],
    buckets: LATENCY_BUCKETS
  })

  /** `GET /plants` answers by how they were asked for (never the search text): the cost of sorts, searches and counts. */
  readonly plantListDuration = new FastHistogram({
    name: 'plantstore_plant_list_duration_seconds',
    help: 'Time to answer a plant listing, by its sort, whether it searched (q) and whether it counted (Prefer: count=exact)',
    labelNames: ['sort', 'searched', 'counted'],
    buckets: LATENCY_BUCKETS
  })

  /** The operations of `POST /plants/batch` requests, by method and whether their batch was applied. */
  readonly batchOperations: Counter<'method' | 'applied'>

  private readonly writeBatchSize = new FastHistogram({
    name: 'plantstore_store_write_batch_size',
    help: 'Writes committed together in one group-commit transaction',
    labelNames: ['backend'],
    buckets: BATCH_SIZE_BUCKETS
  })

  private readonly writeBatchDuration = new FastHistogram({
    name: 'plantstore_store_write_batch_duration_seconds',
    help: 'Time one group-commit transaction took, from its start to its durable commit',
    labelNames: ['backend'],
    buckets: LATENCY_BUCKETS
  })

  private readonly writeBatchesFailed: Counter<'backend'>
  private readonly requestsShed: Counter<'reason'>
  private readonly deliveries: Counter<'result'>
  private readonly jwtKeySetFetches: Counter<'result'>
  private readonly jwtVerifications: Counter<'result'>
  private readonly circuitsOpen: Gauge
  private readonly deliveryDuration = new FastHistogram({
    name: 'plantstore_webhook_delivery_duration_seconds',
    help: 'Time one webhook delivery attempt took, until the receiver answered or the attempt failed',
    labelNames: [],
    buckets: LATENCY_BUCKETS
  })

  /** How long after its commit each change was handed to the live change streams. */
  private readonly changeStreamLag = new FastHistogram({
    name: 'plantstore_change_stream_lag_seconds',
    help: 'Time from a change\'s commit until this instance wrote it to its live change streams',
    labelNames: [],
    buckets: LATENCY_BUCKETS
  })

  private readonly changeStreamsClosed: Counter<'reason'>
  private readInFlight: () => number = () => 0
  private readOpenStreams: () => number = () => 0

  constructor (store: PlantStore, version: string) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry })
    for (const histogram of [
      this.requestDuration, this.plantListDuration, this.storeOperationDuration, this.writeBatchSize, this.writeBatchDuration, this.deliveryDuration,
      this.changeStreamLag
    ]) {
      histogram.registerWith(this.registry)
    }
    this.gauge({ name: 'plantstore_build_info', help: 'The running release; always 1', labelNames: ['version'] }).set({ version }, 1)
    const readInFlight = () => this.readInFlight()
    this.gauge({
      name: 'plantstore_http_requests_in_flight',
      help: 'Requests being answered now (liveness probes not counted)',
      collect () { this.set(readInFlight()) }
    })
    this.requestsShed = new Counter({
      name: 'plantstore_http_requests_shed_total',
      help: 'Requests answered 503 at once because the service was overloaded, by signal',
      labelNames: ['reason'],
      registers
    })
    for (const reason of ['in_flight', 'event_loop'] satisfies ShedReason[]) this.requestsShed.inc({ reason }, 0)
    this.batchOperations = new Counter({
      name: 'plantstore_plant_batch_operations_total',
      help: 'Operations of POST /plants/batch, by method, and whether their batch was applied (all of them) or refused (none)',
      labelNames: ['method', 'applied'],
      registers
    })
    this.writeBatchesFailed = new Counter({
      name: 'plantstore_store_write_batches_failed_total',
      help: 'Group-commit transactions that did not commit (their writes were answered 503)',
      labelNames: ['backend'],
      registers
    })
    if (store.backend !== 'memory') this.writeBatchesFailed.inc({ backend: store.backend }, 0)
    this.gauge({
      name: 'plantstore_store_up',
      help: 'Whether the store answered a ping at this scrape (1) or not (0): what /readyz reports',
      async collect () { this.set(await answers(store.ping()) ? 1 : 0) }
    })
    this.deliveries = new Counter({
      name: 'plantstore_webhook_deliveries_total',
      help: 'Webhook delivery attempts by result: delivered (2xx), retry (due again), failed (given up), gone (410: subscription disabled)',
      labelNames: ['result'],
      registers
    })
    for (const result of ['delivered', 'retry', 'failed', 'gone']) this.deliveries.inc({ result }, 0)
    this.circuitsOpen = this.gauge({
      name: 'plantstore_webhook_circuits_open',
      help: 'Subscriptions whose receiver kept failing, so this instance leaves them alone for a cool-down (circuit open)'
    })
    this.jwtKeySetFetches = new Counter({
      name: 'plantstore_jwt_key_set_fetches_total',
      help: 'Fetches of the identity provider\'s key set (AUTH_JWT_ISSUER), by result: ok, or failed (the keys held before stay in use)',
      labelNames: ['result'],
      registers
    })
    this.jwtVerifications = new Counter({
      name: 'plantstore_jwt_verifications_total',
      help: 'JWT access tokens verified for the first time (a token seen before is remembered until it expires), by result: accepted or refused',
      labelNames: ['result'],
      registers
    })
    const readOpenStreams = () => this.readOpenStreams()
    this.gauge({
      name: 'plantstore_change_streams_open',
      help: 'Live change streams (GET /plants/changes as Server-Sent Events) open on this instance',
      collect () { this.set(readOpenStreams()) }
    })
    this.changeStreamsClosed = new Counter({
      name: 'plantstore_change_streams_closed_total',
      help: 'Change streams ended, by reason: client (it left), slow_client (it did not read), token (revoked or expired), ' +
        'expired (its changes were pruned), shutdown',
      labelNames: ['reason'],
      registers
    })
    for (const reason of ['client', 'slow_client', 'token', 'expired', 'shutdown'] satisfies StreamEnd[]) this.changeStreamsClosed.inc({ reason }, 0)
    this.registerBacklog(store)
    this.registerChangeLog(store)
    if (store.poolUsage !== undefined) this.registerPoolUsage(store.poolUsage)
  }

  /** What the store reports about its batches. */
  readonly storeObserver: StoreObserver = {
    writeBatchEnded: ({ backend, size, seconds, committed }) => {
      if (!committed) {
        this.writeBatchesFailed.inc({ backend })
        return
      }
      this.writeBatchSize.series(backend).observe(size)
      this.writeBatchDuration.series(backend).observe(seconds)
    }
  }

  /** What the JWT access tokens report, key-set fetches and first verifications; their series start at 0 once asked for. */
  jwtObserver (): JwtObserver {
    for (const result of ['ok', 'failed']) this.jwtKeySetFetches.inc({ result }, 0)
    for (const result of ['accepted', 'refused']) this.jwtVerifications.inc({ result }, 0)
    return {
      keySetFetched: (result) => { this.jwtKeySetFetches.inc({ result }) },
      verified: (result) => { this.jwtVerifications.inc({ result }) }
    }
  }

  /** What the webhook dispatcher reports about its attempts. */
  readonly deliveryObserver: DeliveryObserver = {
    deliveryEnded: (result, seconds) => {
      this.deliveries.inc({ result })
      this.deliveryDuration.series().observe(seconds)
    },
    circuitsOpen: (count) => { this.circuitsOpen.set(count) }
  }

  /** What the change streams report. */
  readonly changeStreamObserver: ChangeStreamObserver = {
    countStreamsWith: (read) => { this.readOpenStreams = read },
    changeSent: (lagSeconds) => { this.changeStreamLag.series().observe(lagSeconds) },
    streamClosed: (reason) => { this.changeStreamsClosed.inc({ reason }) }
  }

  /** Where the number of requests in flight is read from (the load-shedding plugin counts them). */
  countInFlightWith (read: () => number): void {
    this.readInFlight = read
  }

  requestShed (reason: ShedReason): void {
    this.requestsShed.inc({ reason })
  }

  /** A gauge in this registry; those with `collect` are read at each scrape. */
  private gauge<Label extends string> (configuration: Omit<GaugeConfiguration<Label>, 'registers'>): Gauge<Label> {
    return new Gauge({ ...configuration, registers: [this.registry] })
  }

  /** The exposition, and its content type (Prometheus text format 0.0.4). */
  async scrape (): Promise<{ readonly contentType: string, readonly text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() }
  }

  private registerBacklog (store: PlantStore): void {
    // One query serves both gauges of a scrape.
    let backlog: ReturnType<PlantStore['webhooks']['backlog']> | undefined
    const readBacklog = () => {
      backlog ??= withTimeout(store.webhooks.backlog()).finally(() => { setImmediate(() => { backlog = undefined }) })
      return backlog.catch(() => undefined)
    }
    this.gauge({
      name: 'plantstore_webhook_backlog_events',
      help: 'Webhook events waiting for delivery (neither delivered nor failed), all subscriptions and instances; NaN when the store does not answer',
      async collect () {
        this.set((await readBacklog())?.pending ?? NaN)
      }
    })
    this.gauge({
      name: 'plantstore_webhook_backlog_oldest_age_seconds',
      help: 'How long the oldest waiting webhook event has waited since its write committed; 0 when none waits',
      async collect () {
        const read = await readBacklog()
        if (read === undefined) this.set(NaN)
        else this.set(read.oldestRecordedAt === undefined ? 0 : Math.max(0, (Date.now() - read.oldestRecordedAt) / 1000))
      }
    })
  }

  private registerChangeLog (store: PlantStore): void {
    // One query serves the three gauges of a scrape.
    let extent: ReturnType<PlantStore['changes']['extent']> | undefined
    const readExtent = () => {
      extent ??= withTimeout(store.changes.extent()).finally(() => { setImmediate(() => { extent = undefined }) })
      return extent.catch(() => undefined)
    }
    this.gauge({
      name: 'plantstore_changes_kept',
      help: 'Changes the feed serves, from the oldest kept seq to the head (CHANGES_RETENTION prunes older ones; a restore ' +
        'serves none of the changes before it); NaN when the store does not answer',
      async collect () { this.set((await readExtent())?.kept ?? NaN) }
    })
    this.gauge({
      name: 'plantstore_changes_oldest_kept_seq',
      help: 'The seq of the oldest kept change (a resume point before it is answered 410); 0 when none is kept',
      async collect () {
        const read = await readExtent()
        this.set(read === undefined ? NaN : Number(read.oldestSeq ?? 0n))
      }
    })
    this.gauge({
      name: 'plantstore_changes_head_seq',
      help: 'The greatest seq committed: GET /plants/changes/head',
      async collect () {
        const read = await readExtent()
        this.set(read === undefined ? NaN : Number(read.head))
      }
    })
  }

  private registerPoolUsage (poolUsage: NonNullable<PlantStore['poolUsage']>): void {
    this.gauge({
      name: 'plantstore_postgres_pool_connections',
      help: 'PostgreSQL connections of this instance by state: idle in the pool, or busy with a query',
      labelNames: ['state'],
      collect () {
        const { total, idle } = poolUsage()
        this.set({ state: 'idle' }, idle)
        this.set({ state: 'busy' }, total - idle)
      }
    })
    this.gauge({
      name: 'plantstore_postgres_pool_max_connections',
      help: 'The most PostgreSQL connections this instance opens (DATABASE_POOL_SIZE)',
      collect () { this.set(poolUsage().max) }
    })
    this.gauge({
      name: 'plantstore_postgres_pool_waiting_queries',
      help: 'Queries waiting for a free PostgreSQL connection',
      collect () { this.set(poolUsage().waiting) }
    })
  }
}

async function answers (ping: Promise<void>): Promise<boolean> {
  try {
    await withTimeout(ping)
    return true
  } catch {
    return false
  }
}

function withTimeout<T> (work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => { reject(new Error('the store did not answer in time')) }, SCRAPE_STORE_TIMEOUT_MS)
  })
  return Promise.race([work, timeout]).finally(() => { clearTimeout(timer) })
}

/** The store as the routes use it: each call's time observed by operation. */
export function measuredStore (store: PlantStore, metrics: ServiceMetrics): PlantStore {
  return wrappedStore(store, (operation, call) => {
    const series = metrics.storeOperationDuration.series(operation, store.backend)
    return (...args) => {
      const startedAt = performance.now()
      const observe = () => { series.observe((performance.now() - startedAt) / 1000) }
      const result = call(...args)
      result.then(observe, observe)
      return result
    }
  })
}
