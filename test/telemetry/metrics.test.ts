import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { connect, createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { describe, expect, it, onTestFinished } from 'vitest'
import { listenForMetrics } from '../../src/telemetry/metrics-listener.js'
import { ServiceMetrics } from '../../src/telemetry/metrics.js'
import { SERVICE_VERSION } from '../../src/version.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { backends, bearer, buildTestApp, postPlant, temporaryFolder, TEST_POSTGRES_OPTIONS, TEST_TOKEN, type TestAppOptions } from '../helpers/app.js'
import { freePort } from '../../scripts/embedded-postgres.js'
import { spawnServer, startServer } from '../helpers/server-process.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { subscribe, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'
import { listenOnLoopback } from '../helpers/test-servers.js'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import { generateSigningKey, startIdentityProvider } from '../helpers/identity-provider.js'
import { claimsFor, nowSeconds, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'

interface Sample { labels?: Record<string, string>, value?: string }
interface Family { name: string, help: string, type: string, metrics: Sample[] }
interface HistogramSeries { labels: Record<string, string>, buckets: Array<readonly [number, number]>, sum: number, count: number }

interface Scrape {
  readonly families: Map<string, Family>
  readonly histograms: Map<string, readonly HistogramSeries[]>
  readonly contentType: string | null
}

/**
 * Scrapes a metrics URL and parses the exposition with parse-prometheus-text-format. That parser merges
 * the series of a labelled histogram into one, so histograms are read as what they are on the wire:
 * their `_bucket` (with `le`), `_sum` and `_count` samples, regrouped here by their other labels.
 */
async function scrape (url: string): Promise<Scrape> {
  const response = await fetch(`${url}/metrics`)
  expect(response.status).toBe(200)
  const text = await response.text()
  const histogramNames = [...text.matchAll(/^# TYPE (\S+) histogram$/gm)].map((match) => match[1] as string)
  const untyped = text.replace(/^# TYPE \S+ histogram\n/gm, '')
  // Untyped, each histogram series' samples come as families of their own, one after another.
  const families = new Map<string, Family>()
  for (const family of parsePrometheusTextFormat(untyped) as Family[]) {
    const earlier = families.get(family.name)
    if (earlier === undefined) families.set(family.name, family)
    else earlier.metrics.push(...family.metrics)
  }
  const histograms = new Map(histogramNames.map((name) => {
    const bySeries = new Map<string, HistogramSeries>()
    const seriesOf = (labels: Record<string, string> = {}) => {
      const { le: _le, ...own } = labels
      const key = JSON.stringify(Object.entries(own).sort())
      let series = bySeries.get(key)
      if (series === undefined) {
        series = { labels: own, buckets: [], sum: NaN, count: NaN }
        bySeries.set(key, series)
      }
      return series
    }
    for (const sample of families.get(`${name}_bucket`)?.metrics ?? []) seriesOf(sample.labels).buckets.push([sample.labels?.le === '+Inf' ? Infinity : Number(sample.labels?.le), Number(sample.value)])
    for (const sample of families.get(`${name}_sum`)?.metrics ?? []) seriesOf(sample.labels).sum = Number(sample.value)
    for (const sample of families.get(`${name}_count`)?.metrics ?? []) seriesOf(sample.labels).count = Number(sample.value)
    return [name, [...bySeries.values()]] as const
  }))
  return { families, histograms, contentType: response.headers.get('content-type') }
}

const matches = (labels: Record<string, string> | undefined, wanted: Record<string, string>) =>
  Object.entries(wanted).every(([name, value]) => labels?.[name] === value)

/** A counter's or gauge's value, or a histogram series' count; 0 when no series has these labels. */
function valueOf (scraped: Scrape, name: string, labels: Record<string, string> = {}): number {
  const histogram = scraped.histograms.get(name)
  if (histogram !== undefined) return histogram.find((series) => matches(series.labels, labels))?.count ?? 0
  const sample = scraped.families.get(name)?.metrics.find((candidate) => matches(candidate.labels, labels))
  return sample === undefined ? 0 : Number(sample.value)
}

/** Buckets rise with `le`, `+Inf` equals the count, and the sum is not negative: for every series. */
function expectConsistentHistograms (scraped: Scrape): void {
  expect(scraped.histograms.size).toBeGreaterThanOrEqual(5)
  for (const [name, allSeries] of scraped.histograms) {
    for (const series of allSeries) {
      const ordered = [...series.buckets].sort(([a], [b]) => a - b)
      const counts = ordered.map(([, count]) => count)
      expect(counts, name).toEqual([...counts].sort((a, b) => a - b))
      expect(ordered.at(-1), name).toEqual([Infinity, series.count])
      expect(series.sum, name).toBeGreaterThanOrEqual(0)
    }
  }
}

/** A port of 127.0.0.1 that another server holds until the test ends. */
async function takenPort (): Promise<number> {
  return listenOnLoopback(createServer())
}

/** The TCP ports a process listens on, from its socket descriptors and the kernel's socket tables (Linux). */
function listeningPorts (pid: number): number[] {
  const inodes = new Set(readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try {
      return /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1]
    } catch {
      return undefined
    }
  }).filter((inode) => inode !== undefined))
  const ports = ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((table) => readFileSync(table, 'utf8').split('\n').slice(1)
    .map((line) => line.trim().split(/\s+/))
    // Columns: sl, local address:port (hex), remote, state (0A is LISTEN), …, inode (the tenth).
    .filter((columns) => columns[3] === '0A' && inodes.has(columns[9] ?? ''))
    .map((columns) => parseInt(columns[1]?.split(':')[1] ?? '', 16)))
  return [...new Set(ports)].sort((a, b) => a - b)
}

/** The app on a fresh store of `open`, with metrics, and its admin listener on a free port. */
async function appWithMetrics (open: () => Promise<PlantStore>, config: TestAppOptions = {}): Promise<{ app: FastifyInstance, url: string }> {
  const app = await buildTestApp({ ...config, store: await open(), config: { ...config.config, metrics: true } })
  const metrics = app.metrics
  if (metrics === null) throw new Error('metrics are off')
  const listener = await listenForMetrics(metrics, '127.0.0.1', 0)
  onTestFinished(() => listener.close())
  return { app, url: listener.url }
}

describe.each(backends)('Metrics on $name', (backend) => {
  it('counts exactly the requests made, by method, route template and status, with consistent histograms', async () => {
    const { app, url } = await appWithMetrics(backend.open)
    const before = await scrape(url)
    const request = (labels: Record<string, string>) => valueOf(before, 'http_request_duration_seconds', labels)
    expect(request({ route: '/plants' })).toBe(0)

    for (const id of [1, 2, 3]) expect((await postPlant(app, { id, name: `plant ${id}` })).statusCode).toBe(200)
    expect((await postPlant(app, { id: 1, name: 'another name' })).statusCode).toBe(409)
    for (const id of [1, 2]) expect((await app.inject({ method: 'GET', url: `/plants/${id}`, headers: bearer() })).statusCode).toBe(200)
    expect((await app.inject({ method: 'GET', url: '/plants/987654321', headers: bearer() })).statusCode).toBe(404)
    expect((await app.inject({ method: 'HEAD', url: '/plants/3', headers: bearer() })).statusCode).toBe(200)
    expect((await app.inject({ method: 'GET', url: '/plants?limit=2' })).statusCode).toBe(401)
    for (const path of ['/wp-login.php', '/favicon.ico', '/.env']) expect((await app.inject({ method: 'GET', url: path })).statusCode).toBe(404)
    expect((await app.inject({ method: 'PUT', url: '/healthz' })).statusCode).toBe(405)

    const after = await scrape(url)
    expect(after.contentType).toBe('text/plain; version=0.0.4; charset=utf-8')
    const series = after.histograms.get('http_request_duration_seconds')
      ?.map(({ labels, count }) => `${labels.method} ${labels.route} ${labels.status_code} ${count}`).sort()
    expect(series).toEqual([
      'GET /plants 401 1',
      'GET /plants/:id 200 2',
      'GET /plants/:id 404 1',
      'GET unmatched 404 3',
      'HEAD /plants/:id 200 1',
      'POST /plants 200 3',
      'POST /plants 409 1',
      'PUT unmatched 405 1'
    ])
    expectConsistentHistograms(after)
    const operations = (operation: string) => valueOf(after, 'plantstore_store_operation_duration_seconds', { operation, backend: backend.name })
    expect([operations('create'), operations('get'), operations('list')]).toEqual([4, 4, 0])
    expect(valueOf(after, 'plantstore_http_requests_in_flight')).toBe(0)
    expect(valueOf(after, 'plantstore_store_up')).toBe(1)
    expect(after.families.get('plantstore_build_info')?.metrics).toEqual([{ labels: { version: SERVICE_VERSION }, value: '1' }])
    expect(after.families.get('plantstore_http_requests_shed_total')?.type).toBe('COUNTER')
    expect(after.families.get('process_cpu_seconds_total')?.type).toBe('COUNTER')
    expect(after.families.get('nodejs_eventloop_lag_p99_seconds')?.type).toBe('GAUGE')

    if (backend.name === 'memory') {
      expect(after.histograms.get('plantstore_store_write_batch_size')).toEqual([])
    } else {
      // Four creates (one a conflict), each awaited before the next: four transactions of one.
      const [batches] = after.histograms.get('plantstore_store_write_batch_size') ?? []
      expect(batches?.labels).toEqual({ backend: backend.name })
      expect(batches?.sum).toBe(4)
      expect(batches?.count).toBe(4)
      expect(valueOf(after, 'plantstore_store_write_batch_duration_seconds', { backend: backend.name })).toBe(batches?.count)
      expect(valueOf(after, 'plantstore_store_write_batches_failed_total', { backend: backend.name })).toBe(0)
    }
    if (backend.name === 'postgres') {
      expect(valueOf(after, 'plantstore_postgres_pool_max_connections')).toBe(TEST_POSTGRES_OPTIONS.poolSize)
      const idle = valueOf(after, 'plantstore_postgres_pool_connections', { state: 'idle' })
      const busy = valueOf(after, 'plantstore_postgres_pool_connections', { state: 'busy' })
      expect(idle).toBeGreaterThanOrEqual(1)
      expect(idle + busy).toBeLessThanOrEqual(TEST_POSTGRES_OPTIONS.poolSize)
      expect(valueOf(after, 'plantstore_postgres_pool_waiting_queries')).toBe(0)
    } else {
      expect(after.families.has('plantstore_postgres_pool_connections')).toBe(false)
    }
  })

  it('shows the webhook backlog while delivery is off, and delivery outcomes once it runs', async () => {
    const receiver = await WebhookReceiver.start()
    onTestFinished(() => receiver.stop())
    const recording = await appWithMetrics(backend.open, { tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: { ...WEBHOOK_TEST_CONFIG, deliver: false } } })
    await subscribe(recording.app, receiver)
    for (const id of [10, 11, 12]) expect((await postPlant(recording.app, { id, name: 'waiting' })).statusCode).toBe(200)
    const waiting = await scrape(recording.url)
    expect(valueOf(waiting, 'plantstore_webhook_backlog_events')).toBe(3)
    const age = valueOf(waiting, 'plantstore_webhook_backlog_oldest_age_seconds')
    expect(age).toBeGreaterThanOrEqual(0)
    expect(age).toBeLessThan(30)
    expect(valueOf(waiting, 'plantstore_webhook_deliveries_total', { result: 'delivered' })).toBe(0)

    // An app that delivers: its receiver answers 500 first, then 204.
    let answered = 0
    receiver.answerWith(() => ({ status: answered++ === 0 ? 500 : 204 }))
    const delivering = await appWithMetrics(backend.open, { tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    await subscribe(delivering.app, receiver)
    expect((await postPlant(delivering.app, { id: 20, name: 'retried' })).statusCode).toBe(200)
    await receiver.waitForDeliveries(2)
    await expect.poll(async () => valueOf(await scrape(delivering.url), 'plantstore_webhook_deliveries_total', { result: 'delivered' }))
      .toBe(1)
    const delivered = await scrape(delivering.url)
    expect(valueOf(delivered, 'plantstore_webhook_deliveries_total', { result: 'retry' })).toBe(1)
    expect(valueOf(delivered, 'plantstore_webhook_delivery_duration_seconds')).toBe(2)
    await expect.poll(async () => valueOf(await scrape(delivering.url), 'plantstore_webhook_backlog_events')).toBe(0)
  })

  it('shows the change log: changes kept, the oldest kept seq and the head, after writes and after pruning', async () => {
    let store: PlantStore | undefined
    const { app, url } = await appWithMetrics(async () => (store = await backend.open()))
    const changeLog = async () => {
      const scraped = await scrape(url)
      const names = ['plantstore_changes_kept', 'plantstore_changes_oldest_kept_seq', 'plantstore_changes_head_seq', 'plantstore_change_streams_open']
      expect(names.filter((name) => scraped.families.get(name)?.metrics.length !== 1), 'gauges without their one sample').toEqual([])
      return names.map((name) => valueOf(scraped, name))
    }
    const fresh = await changeLog()
    for (const id of [1, 2, 3]) expect((await postPlant(app, { id, name: `p${id}` })).statusCode).toBe(200)
    expect((await app.inject({ method: 'DELETE', url: '/plants/2', headers: bearer() })).statusCode).toBe(204)
    const written = await changeLog()

    // The two oldest changes, as a round of retention prunes them.
    expect(await store?.changes.prune(Date.now() + 60_000, 2)).toBe(2)
    const pruned = await changeLog()
    expect(await store?.changes.prune(Date.now() + 60_000, 1000)).toBe(2)
    const allPruned = await changeLog()

    expect({ fresh, written, pruned, allPruned }).toEqual({ fresh: [0, 0, 0, 0], written: [4, 1, 4, 0], pruned: [2, 3, 4, 0], allPruned: [0, 0, 4, 0] })
  })
})

describe('Metrics of an unavailable store and of shed requests', () => {
  it('reports the store down when PostgreSQL does not answer', async () => {
    const port = await freePort()
    const store = await openPostgresStore(`postgres://nobody:nothing@127.0.0.1:${port}/none`, { ...TEST_POSTGRES_OPTIONS, connectTimeoutMs: 300 })
    onTestFinished(() => store.close())
    const listener = await listenForMetrics(new ServiceMetrics(store, SERVICE_VERSION), '127.0.0.1', 0)
    onTestFinished(() => listener.close())
    const url = listener.url
    const scraped = await scrape(url)
    expect(valueOf(scraped, 'plantstore_store_up')).toBe(0)
    // Unknown, not zero (prom-client writes NaN as "Nan", which Prometheus reads as NaN).
    expect(valueOf(scraped, 'plantstore_webhook_backlog_events')).toBeNaN()
    expect(valueOf(scraped, 'plantstore_webhook_backlog_oldest_age_seconds')).toBeNaN()
  })

  it('counts requests shed for too many in flight', async () => {
    const { app, url } = await appWithMetrics(backends[0]!.open, { config: { maxInFlightRequests: 1 } })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address()
    const port = typeof address === 'object' && address !== null ? address.port : 0
    // A POST whose body is owed holds the only slot.
    const holder: Socket = connect(port, '127.0.0.1')
    holder.on('error', () => {})
    holder.write(`POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n`)
    onTestFinished(() => { holder.destroy() })
    await expect.poll(async () => valueOf(await scrape(url), 'plantstore_http_requests_in_flight')).toBe(1)
    for (let shed = 0; shed < 3; shed++) expect((await fetch(`http://127.0.0.1:${port}/plants/1`, { headers: bearer() })).status).toBe(503)
    const scraped = await scrape(url)
    expect(valueOf(scraped, 'plantstore_http_requests_shed_total', { reason: 'in_flight' })).toBe(3)
    expect(valueOf(scraped, 'plantstore_http_requests_shed_total', { reason: 'event_loop' })).toBe(0)
    expect(valueOf(scraped, 'http_request_duration_seconds', { route: '/plants/:id', status_code: '503' })).toBe(3)
  })
})

describe('Metrics of JWT access tokens', () => {
  it('count key-set fetches and first verifications by result, not the repeats of a remembered token', async () => {
    const provider = await startIdentityProvider({ keys: [await generateSigningKey('ES256', 'metrics-ec')] })
    onTestFinished(() => provider.close())
    const settings = { issuer: provider.issuer, audiences: [TEST_AUDIENCE], jwksUrl: undefined, algorithms: ['ES256' as const], scopeClaim: 'scope', clockToleranceS: 30 }
    const { app, url } = await appWithMetrics(async () => openMemoryStore(), { jwt: new JwtAccessTokens(settings) })
    const plain = await appWithMetrics(async () => openMemoryStore())
    const token = await provider.sign(claimsFor(provider))
    const expired = await provider.sign(claimsFor(provider, { exp: nowSeconds() - 3600 }))

    const statuses = []
    for (const bearerToken of [token, token, token, expired]) statuses.push((await app.inject({ method: 'GET', url: '/plants', headers: bearer(bearerToken) })).statusCode)
    const scraped = await scrape(url)

    expect(statuses).toEqual([200, 200, 200, 401])
    expect(valueOf(scraped, 'plantstore_jwt_key_set_fetches_total', { result: 'ok' })).toBe(1)
    expect(valueOf(scraped, 'plantstore_jwt_key_set_fetches_total', { result: 'failed' })).toBe(0)
    expect(valueOf(scraped, 'plantstore_jwt_verifications_total', { result: 'accepted' })).toBe(1)
    expect(valueOf(scraped, 'plantstore_jwt_verifications_total', { result: 'refused' })).toBe(1)
    expect((await scrape(plain.url)).families.get('plantstore_jwt_verifications_total')?.metrics ?? []).toEqual([])
  })
})

describe('The admin listener of the built server', () => {
  it('serves /metrics on METRICS_PORT only, never on the public port, and answers other paths in the Error envelope', async () => {
    const metricsPort = await freePort()
    const server = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'p.db')}`, PLANTSTORE_TOKENS: TEST_TOKEN, METRICS_PORT: String(metricsPort) })
    const metricsUrl = `http://127.0.0.1:${metricsPort}`
    const created = await fetch(`${server.baseUrl}/plants`, {
      method: 'POST', headers: { ...bearer(), 'content-type': 'application/json' }, body: '{"id":5,"name":"scraped"}'
    })
    expect(created.status).toBe(200)

    const publicMetrics = await fetch(`${server.baseUrl}/metrics`)
    expect({ status: publicMetrics.status, body: await publicMetrics.json() }).toEqual({ status: 404, body: { error: 404, message: 'no route GET /metrics' } })
    const scraped = await scrape(metricsUrl)
    expect(valueOf(scraped, 'http_request_duration_seconds', { method: 'POST', route: '/plants', status_code: '200' })).toBe(1)
    expect(valueOf(scraped, 'http_request_duration_seconds', { method: 'GET', route: 'unmatched', status_code: '404' })).toBe(1)
    expect(valueOf(scraped, 'plantstore_store_write_batch_size', { backend: 'sqlite' })).toBe(1)

    const other = await fetch(`${metricsUrl}/plants`)
    expect({ status: other.status, type: other.headers.get('content-type'), body: await other.json() })
      .toEqual({ status: 404, type: 'application/json; charset=utf-8', body: { error: 404, message: 'no route GET /plants' } })
    const posted = await fetch(`${metricsUrl}/metrics`, { method: 'POST' })
    expect({ status: posted.status, allow: posted.headers.get('allow'), body: await posted.json() })
      .toEqual({ status: 405, allow: 'GET, HEAD', body: { error: 405, message: '/metrics does not support POST; allowed: GET, HEAD' } })
    const head = await fetch(`${metricsUrl}/metrics`, { method: 'HEAD' })
    expect(head.status).toBe(200)
    expect(await head.text()).toBe('')

    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)
    await expect(fetch(`${metricsUrl}/metrics`)).rejects.toThrow()
  })

  it('does not start when METRICS_PORT is taken, and says so naming the variable', async () => {
    const port = await takenPort()
    const server = spawnServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'p.db')}`, PLANTSTORE_TOKENS: TEST_TOKEN, METRICS_PORT: String(port) })
    expect(await server.exited).toBe(1)
    expect(server.stderr()).toBe(`plantstore could not start: METRICS_PORT ${port} is already in use on 127.0.0.1: ` +
      'set METRICS_PORT to a free port, or to 0 to turn metrics off\n')
    expect(server.stdout()).not.toContain('Server listening')
  })

  it('still shows the initial-admin token it made when METRICS_PORT is taken, so the token is not lost', async () => {
    const port = await takenPort()
    const file = join(temporaryFolder(), 'p.db')
    const server = spawnServer({ DATABASE_URL: `sqlite:${file}`, METRICS_PORT: String(port) })
    expect(await server.exited).toBe(1)
    const token = /^ {2}(pst_\S+)$/m.exec(server.stderr())?.[1]
    expect(token).toMatch(/^pst_/)
    expect(server.stderr()).toContain(`plantstore could not start: METRICS_PORT ${port} is already in use on 127.0.0.1`)

    const restarted = await startServer({ DATABASE_URL: `sqlite:${file}`, METRICS_PORT: '0' })
    const read = await fetch(`${restarted.baseUrl}/plants`, { headers: { authorization: `Bearer ${token}` } })
    expect(read.status).toBe(200)
  })

  it('opens no listener but the public port with METRICS_PORT=0, and one more otherwise', async () => {
    const off = await startServer({ DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: TEST_TOKEN, METRICS_PORT: '0' })
    const metricsPort = await freePort()
    const on = await startServer({ DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: TEST_TOKEN, METRICS_PORT: String(metricsPort) })

    expect(listeningPorts(off.child.pid as number)).toEqual([Number(new URL(off.baseUrl).port)])
    expect(off.stdout()).not.toContain('metrics at')
    expect(listeningPorts(on.child.pid as number)).toEqual([Number(new URL(on.baseUrl).port), metricsPort].sort((a, b) => a - b))
    expect(on.stdout()).toContain(`"msg":"metrics at http://127.0.0.1:${metricsPort}/metrics"`)
  })

  it('collects nothing in an app built without metrics', async () => {
    const app = await buildTestApp()
    expect(app.metrics).toBeNull()
  })
})
