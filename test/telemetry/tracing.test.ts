import { join } from 'node:path'
import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest'
import { buildApp, type AppConfig } from '../../src/app.js'
import { AccessTokenRegistry } from '../../src/auth/token-registry.js'
import { parseTokenList } from '../../src/auth/tokens.js'
import { startTracing } from '../../src/telemetry/tracing.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { SERVICE_VERSION } from '../../src/version.js'
import { bearer, buildTestApp, postPlant, TEST_TOKEN, temporaryFolder } from '../helpers/app.js'
import { openLiveStream, putPlant } from '../helpers/change-streams.js'
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js'
import { spawnServer, startServer } from '../helpers/server-process.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { subscribe, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'

/** A caller's span, as a client would send it in `traceparent`. */
const CALLER = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' }
const CALLER_TRACEPARENT = `00-${CALLER.traceId}-${CALLER.spanId}-01`

type LogLine = Record<string, unknown>

function collectingStream (): { stream: Writable, lines: () => LogLine[] } {
  const chunks: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString())
      callback()
    }
  })
  return { stream, lines: () => linesOf(chunks.join('')) }
}

function linesOf (text: string): LogLine[] {
  return text.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as LogLine)
}

const nextTurn = () => new Promise(setImmediate)
/**
 * How far two spans' clocks may disagree: each is anchored to Date.now() when it starts, and on a loaded
 * machine the thread can wait for a core between its two clock readings.
 */
const CLOCK_SLACK_NS = 10_000_000n

afterEach(() => { vi.unstubAllEnvs() })

/**
 * The production app with tracing started as server.ts starts it, exporting OTLP JSON to `receiver`
 * every 50 ms; closing the app (when the test ends) stops tracing.
 */
async function tracedApp (receiver: OtlpReceiver, options: {
  store?: PlantStore
  tokens?: readonly string[]
  config?: Partial<AppConfig>
} = {}): Promise<{ app: FastifyInstance, log: () => LogLine[] }> {
  vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', receiver.endpoint)
  vi.stubEnv('OTEL_EXPORTER_OTLP_PROTOCOL', 'http/json')
  vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '50')
  const tracing = await startTracing('http/json')
  const store = options.store ?? openSqliteStore(join(temporaryFolder(), 'plants.db'))
  const accessTokens = new AccessTokenRegistry(store.tokens, parseTokenList((options.tokens ?? [TEST_TOKEN]).join(',')))
  await accessTokens.refresh()
  const log = collectingStream()
  const app = await buildApp(
    { bodyLimit: 16384, logLevel: 'info', prettyLogs: false, ...options.config },
    { store, accessTokens, logStream: log.stream, tracing })
  // Test-end callbacks run last-registered first: the app (and tracing) stops before the receivers close.
  onTestFinished(() => app.close())
  return { app, log: log.lines }
}

const childrenOf = (spans: readonly ReceivedSpan[], parent: ReceivedSpan) =>
  spans.filter((span) => span.traceId === parent.traceId && span.parentSpanId === parent.spanId)

describe('Tracing, when an OTLP endpoint is set', () => {
  it('makes a server span per request named by its route template, with its status, child of the caller\'s span', async () => {
    const receiver = await OtlpReceiver.start()
    const { app, log } = await tracedApp(receiver)

    const created = await postPlant(app, { id: 7, name: 'Fern' }, { traceparent: CALLER_TRACEPARENT, 'x-request-id': 'create-7' })
    const read = await app.inject({ method: 'GET', url: '/plants/7?x=1', headers: { ...bearer(), 'x-request-id': 'read-7' } })
    const unknown = await app.inject({ method: 'GET', url: '/no/such/path', headers: { 'x-request-id': 'unknown' } })
    expect([created.statusCode, read.statusCode, unknown.statusCode]).toEqual([200, 200, 404])

    const spans = await receiver.waitFor((received) => received.some((span) => span.name === 'GET') &&
      received.some((span) => span.name === 'GET /plants/:id'))
    const post = receiver.only('POST /plants')
    expect(post).toMatchObject({
      traceId: CALLER.traceId,
      parentSpanId: CALLER.spanId,
      kind: 'server',
      attributes: expect.objectContaining({
        'http.request.method': 'POST',
        'http.route': '/plants',
        'http.response.status_code': 200
      }),
      resource: expect.objectContaining({ 'service.name': 'plantstore', 'service.version': SERVICE_VERSION }),
      scope: '@fastify/otel'
    })
    const get = receiver.only('GET /plants/:id')
    expect(get.traceId).not.toBe(CALLER.traceId)
    expect(get.parentSpanId).toBeUndefined()
    expect(get.attributes).toMatchObject({ 'http.route': '/plants/:id', 'http.response.status_code': 200, 'url.path': '/plants/7', 'url.query': 'x=1' })
    expect(receiver.only('GET').attributes).toMatchObject({ 'http.response.status_code': 404, 'url.path': '/no/such/path' })
    expect(receiver.only('GET').attributes['http.route']).toBeUndefined()
    // @fastify/otel wraps the not-found handler in a span of its own, whatever its options.
    expect(childrenOf(spans, receiver.only('GET')).map((span) => span.name)).toEqual([expect.stringMatching(/^notFoundHandler - /)])

    // The store calls are children of their requests' spans.
    expect(childrenOf(spans, post).map((span) => [span.name, span.attributes])).toEqual([
      ['store create', { 'plantstore.store.backend': 'sqlite', 'plantstore.store.outcome': 'created' }]
    ])
    expect(childrenOf(spans, get).map((span) => span.name)).toEqual(['store get'])

    // Each request's log line names its span.
    await nextTurn()
    const completed = (id: string) => log().find((line) => line.reqId === id && line.msg === 'request completed')
    expect(completed('create-7')).toMatchObject({ trace_id: CALLER.traceId, span_id: post.spanId, statusCode: 200 })
    expect(completed('read-7')).toMatchObject({ trace_id: get.traceId, span_id: get.spanId })
    expect(Object.keys(completed('read-7') ?? {}).slice(0, 7)).toEqual(['level', 'time', 'pid', 'hostname', 'reqId', 'trace_id', 'span_id'])
  })

  it('ends the span of a change stream when it closes, whether its client left or the service ended it; and no stream is a request duration', async () => {
    const receiver = await OtlpReceiver.start()
    const { app } = await tracedApp(receiver, { config: { metrics: true } })
    const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })
    const leaving = await openLiveStream(baseUrl, '?type=plant.deleted')
    const staying = await openLiveStream(baseUrl)
    await putPlant(app, 8, { name: 'Streamed fern' })
    await staying.waitForEvents(1)

    leaving.close()
    await receiver.waitFor((received) => received.some((span) => span.name === 'GET /plants/changes'))
    await app.close()
    await staying.ended
    const scraped = await app.metrics?.scrape()
    const spans = await receiver.waitFor((received) => received.filter((span) => span.name === 'GET /plants/changes').length === 2)

    expect(spans.filter((span) => span.name === 'GET /plants/changes').map((span) => ({
      query: span.attributes['url.query'], status: span.attributes['http.response.status_code']
    }))).toEqual([{ query: 'type=plant.deleted', status: 200 }, { query: undefined, status: 200 }])
    expect(scraped?.text).not.toContain('route="/plants/changes"')
  })

  it('makes a span per group-commit batch, linked to every store call it committed, each of which links back to it (metrics on too)', async () => {
    const receiver = await OtlpReceiver.start()
    const { app } = await tracedApp(receiver, { config: { metrics: true } })

    const answers = await Promise.all([1, 2, 3, 4, 5].map((id) => postPlant(app, { id, name: `Plant ${id}` })))
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 200, 200, 200])

    const spans = await receiver.waitFor((received) => received.filter((span) => span.name === 'store create').length === 5 &&
      received.filter((span) => span.name === 'store write batch').reduce((sum, span) => sum + Number(span.attributes['plantstore.store.batch.size']), 0) === 5)
    const requests = spans.filter((span) => span.name === 'POST /plants')
    const creates = spans.filter((span) => span.name === 'store create')
    const batches = spans.filter((span) => span.name === 'store write batch')
    expect(requests).toHaveLength(5)
    // Every create is the child of one request's span, and every request has its own create...
    expect(creates.map((create) => requests.filter((request) => childrenOf(spans, request).includes(create)).length)).toEqual([1, 1, 1, 1, 1])
    expect(requests.map((request) => childrenOf(spans, request).map((child) => child.name))).toEqual(Array(5).fill(['store create']))
    for (const batch of batches) {
      // ...and a batch is a trace of its own, linked to the creates it committed, as many as its size.
      expect(batch).toMatchObject({ kind: 'internal', status: { code: 0 }, attributes: { 'plantstore.store.backend': 'sqlite' } })
      expect(batch.parentSpanId).toBeUndefined()
      expect(requests.map((request) => request.traceId)).not.toContain(batch.traceId)
      expect(batch.links).toHaveLength(Number(batch.attributes['plantstore.store.batch.size']))
      expect(batch.startTimeUnixNano).toBeLessThanOrEqual(batch.endTimeUnixNano)
    }
    const batchLinks = batches.flatMap((batch) => batch.links).map((link) => `${link.traceId}/${link.spanId}`)
    expect(batchLinks.toSorted()).toEqual(creates.map((create) => `${create.traceId}/${create.spanId}`).toSorted())
    // Each create links back to its batch, which ran while the create waited for it (to within the clocks' slack).
    for (const create of creates) {
      const batch = batches.find((candidate) => candidate.links.some((link) => link.spanId === create.spanId)) as ReceivedSpan
      expect(create.links).toEqual([{ traceId: batch.traceId, spanId: batch.spanId }])
      expect(batch.startTimeUnixNano).toBeGreaterThanOrEqual(create.startTimeUnixNano - CLOCK_SLACK_NS)
      expect(batch.endTimeUnixNano).toBeLessThanOrEqual(create.endTimeUnixNano + CLOCK_SLACK_NS)
    }
    // The metrics saw the same batches as the spans: both observe the store.
    const { text } = await (app.metrics as NonNullable<typeof app.metrics>).scrape()
    expect(text).toContain('plantstore_store_write_batch_size_sum{backend="sqlite"} 5\n')
    expect(text).toContain(`plantstore_store_write_batch_size_count{backend="sqlite"} ${batches.length}\n`)
  })

  it('records a failed store call as an error, and the error\'s log line carries the request\'s trace id', async () => {
    const receiver = await OtlpReceiver.start()
    const working = openMemoryStore()
    const failing: PlantStore = { ...working, get: async () => { throw new Error('the disk is on fire') } }
    const { app, log } = await tracedApp(receiver, { store: failing })

    const response = await app.inject({ method: 'GET', url: '/plants/9', headers: { ...bearer(), 'x-request-id': 'failing' } })
    expect(response.statusCode).toBe(500)

    const spans = await receiver.waitFor((received) => received.some((span) => span.name === 'GET /plants/:id'))
    const get = receiver.only('GET /plants/:id')
    expect(get).toMatchObject({ status: { code: 2 }, attributes: expect.objectContaining({ 'http.response.status_code': 500 }) })
    expect(childrenOf(spans, get).map((span) => [span.name, span.status])).toEqual([['store get', { code: 2, message: 'the disk is on fire' }]])
    await nextTurn()
    const errorLine = log().find((line) => line.level === 50 && line.reqId === 'failing')
    expect(errorLine).toMatchObject({ trace_id: get.traceId, span_id: get.spanId, err: expect.objectContaining({ message: 'the disk is on fire' }) })
    expect(Object.keys(errorLine ?? {}).slice(0, 7)).toEqual(['level', 'time', 'pid', 'hostname', 'reqId', 'trace_id', 'span_id'])
  })

  it('makes a client span per webhook delivery attempt and sends its context to the receiver in traceparent', async () => {
    const receiver = await OtlpReceiver.start()
    const webhooks = await WebhookReceiver.start()
    const { app } = await tracedApp(receiver, { tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const subscription = await subscribe(app, webhooks)

    const created = await postPlant(app, { id: 11, name: 'Ivy' }, { traceparent: CALLER_TRACEPARENT })
    expect(created.statusCode).toBe(200)
    const [delivery] = await webhooks.waitForDeliveries(1)

    await receiver.waitFor((spans) => spans.some((span) => span.name === 'webhook delivery'))
    const attempt = receiver.only('webhook delivery')
    expect(delivery?.headers.traceparent).toBe(`00-${attempt.traceId}-${attempt.spanId}-01`)
    expect(attempt).toMatchObject({
      kind: 'client',
      status: { code: 0 },
      attributes: {
        'http.request.method': 'POST',
        'http.response.status_code': 204,
        'server.address': '127.0.0.1',
        'server.port': webhooks.port,
        'plantstore.webhook.event_id': delivery?.id,
        'plantstore.webhook.event_type': 'plant.created',
        'plantstore.webhook.subscription_id': subscription,
        'plantstore.webhook.attempt': 1,
        'plantstore.webhook.result': 'delivered'
      }
    })
    // Its own trace: the outbox does not keep the trace of the request that made the event.
    expect(attempt.parentSpanId).toBeUndefined()
    expect(attempt.traceId).not.toBe(CALLER.traceId)
  })

  it('records a failed attempt as an error with the receiver\'s status', async () => {
    const receiver = await OtlpReceiver.start()
    const webhooks = await WebhookReceiver.start()
    webhooks.answerWith(() => ({ status: 503 }))
    const { app } = await tracedApp(receiver, { tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    await subscribe(app, webhooks)

    await postPlant(app, { id: 12, name: 'Moss' })
    await receiver.waitFor((spans) => spans.some((span) => span.name === 'webhook delivery'))
    expect(receiver.spans.find((span) => span.name === 'webhook delivery')).toMatchObject({
      status: { code: 2 },
      attributes: expect.objectContaining({ 'http.response.status_code': 503, 'error.type': '503', 'plantstore.webhook.result': 'retry' })
    })
  })
})

describe('Tracing off (no OTLP endpoint)', () => {
  it('registers nothing: no @fastify/otel plugin, no trace ids in the log line', async () => {
    const log = collectingStream()
    const app = await buildTestApp({ logStream: log.stream, config: { logLevel: 'info' } })

    await app.inject({ method: 'GET', url: '/plants/1', headers: { ...bearer(), traceparent: CALLER_TRACEPARENT, 'x-request-id': 'off' } })
    await nextTurn()

    expect(app.hasPlugin('@fastify/otel')).toBe(false)
    expect(app.hasPlugin('request-spans')).toBe(false)
    expect(Object.keys(log.lines().find((line) => line.reqId === 'off') ?? {})).not.toContain('trace_id')
  })
})

/**
 * Loaded into the server process with NODE_OPTIONS: at exit, writes to standard error the OpenTelemetry
 * and @fastify/otel packages the process loaded (CommonJS, so all in the require cache). NODE_OPTIONS
 * applies to worker threads too (the SQLite writer): only the main thread reports.
 */
const LOADED_MODULES_REPORT = 'data:text/javascript,' + encodeURIComponent(`
import { createRequire } from 'node:module'
import { writeSync } from 'node:fs'
import { isMainThread } from 'node:worker_threads'
const require = createRequire(process.cwd() + '/')
if (isMainThread) process.on('exit', () => {
  const packages = new Set(Object.keys(require.cache)
    .map((file) => /node_modules\\/(@opentelemetry\\/[^/]+|@fastify\\/otel)\\//.exec(file)?.[1])
    .filter((name) => name !== undefined))
  writeSync(2, 'loaded packages: ' + JSON.stringify([...packages].sort()) + '\\n')
})
`)

function loadedPackages (stderr: string): string[] {
  const report = /loaded packages: (.*)\n/.exec(stderr)?.[1]
  if (report === undefined) throw new Error(`no loaded-packages report in:\n${stderr}`)
  return JSON.parse(report) as string[]
}

const SERVER_ENV = { PLANTSTORE_TOKENS: TEST_TOKEN, METRICS_PORT: '0', NODE_OPTIONS: `--import=${LOADED_MODULES_REPORT}` }

describe('The server process', () => {
  it('exports spans over OTLP/HTTP protobuf (the default) and flushes them when it stops', async () => {
    const receiver = await OtlpReceiver.start()
    const server = await startServer({
      ...SERVER_ENV,
      DATABASE_URL: `sqlite:${join(temporaryFolder(), 'plants.db')}`,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      // Nothing is exported before the stop, so what arrives was flushed by it.
      OTEL_BSP_SCHEDULE_DELAY: '60000',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test'
    })

    const response = await fetch(`${server.baseUrl}/plants`, {
      method: 'POST',
      headers: { ...bearer(), 'content-type': 'application/json', traceparent: CALLER_TRACEPARENT },
      body: JSON.stringify({ id: 21, name: 'Aloe' })
    })
    expect(response.status).toBe(200)
    expect(receiver.spans).toEqual([])
    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)

    const spans = await receiver.waitFor((received) => received.some((span) => span.name === 'store write batch'), 2000)
    expect(receiver.contentTypes.every((type) => type === 'application/x-protobuf')).toBe(true)
    const post = receiver.only('POST /plants')
    expect(post).toMatchObject({
      traceId: CALLER.traceId,
      parentSpanId: CALLER.spanId,
      kind: 'server',
      attributes: expect.objectContaining({ 'http.route': '/plants', 'http.response.status_code': 200 }),
      resource: expect.objectContaining({
        'service.name': 'plantstore',
        'service.version': SERVICE_VERSION,
        'deployment.environment.name': 'test'
      })
    })
    const [create] = childrenOf(spans, post)
    expect(create).toMatchObject({ name: 'store create', attributes: { 'plantstore.store.backend': 'sqlite', 'plantstore.store.outcome': 'created' } })
    const batch = receiver.only('store write batch')
    expect(batch.links).toEqual([{ traceId: CALLER.traceId, spanId: create?.spanId }])
    expect(create?.links).toEqual([{ traceId: batch.traceId, spanId: batch.spanId }])

    const completed = linesOf(server.stdout()).find((line) => line.msg === 'request completed')
    expect(completed).toMatchObject({ trace_id: CALLER.traceId, span_id: post.spanId, statusCode: 200 })
    expect(loadedPackages(server.stderr())).toEqual(expect.arrayContaining([
      '@fastify/otel', '@opentelemetry/sdk-trace-node', '@opentelemetry/exporter-trace-otlp-proto'
    ]))
    expect(loadedPackages(server.stderr())).not.toContain('@opentelemetry/exporter-trace-otlp-http')
  })

  it('loads no part of the OpenTelemetry SDK without an OTLP endpoint', async () => {
    const server = await startServer({ ...SERVER_ENV, DATABASE_URL: 'memory:' })

    const response = await fetch(`${server.baseUrl}/plants`, {
      method: 'POST',
      headers: { ...bearer(), 'content-type': 'application/json', traceparent: CALLER_TRACEPARENT },
      body: JSON.stringify({ id: 22, name: 'Basil' })
    })
    expect(response.status).toBe(200)
    expect([...response.headers.keys()].filter((name) => /trace/.test(name))).toEqual([])
    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)

    expect(linesOf(server.stdout()).find((line) => line.msg === 'request completed')).not.toHaveProperty('trace_id')
    // prom-client (the metrics) requires the API package, @opentelemetry/api, for exemplars: only the API, no SDK.
    expect(loadedPackages(server.stderr()).filter((name) => name !== '@opentelemetry/api')).toEqual([])
  })

  it('refuses an OTLP protocol it cannot export', async () => {
    const server = spawnServer({ DATABASE_URL: 'memory:', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })
    expect(await server.exited).toBe(1)
    expect(server.stderr()).toBe('plantstore could not start: configuration error: OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf" ' +
      'or "http/json" (gRPC is not supported), got "grpc"\n')
  })
})
