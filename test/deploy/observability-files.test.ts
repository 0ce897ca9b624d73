import { createRequire } from 'node:module'
import { createServer } from 'node:http'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'
import { parse } from 'yaml'
import { temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { freePort } from '../../scripts/embedded-postgres.js'
import { startServer } from '../helpers/server-process.js'
import { listenOnLoopback } from '../helpers/test-servers.js'
import { generateSigningKey, startIdentityProvider } from '../helpers/identity-provider.js'
import { claimsFor, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'

/**
 * The monitoring kit under deploy/observability/ and the compose profile that runs it: the alerting
 * rules and the Grafana dashboard only query metrics (and labels) that a real plantstore exposes, scraped
 * here from the built service on SQLite and on PostgreSQL; the files are well formed; and the paths the
 * compose file mounts are the ones Prometheus and Grafana are told to read.
 */

const ROOT = new URL('../../', import.meta.url)
const OBSERVABILITY = new URL('deploy/observability/', ROOT)
const PROFILE = 'observability'
/** Grafana's reference to the data source variable, on every panel and target. */
const DATASOURCE = { type: 'prometheus', uid: '$' + '{datasource}' }
const SCRAPE_JOB = 'plantstore'

const readText = (url: URL) => readFileSync(url, 'utf8')
const readYaml = (url: URL): unknown => parse(readText(url))

// parse-prometheus-text-format ships no types: its shape, as far as this test reads it.
interface MetricFamily {
  name: string
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED'
  metrics: Array<{ labels?: Record<string, string> }>
}
const parsePrometheusText = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => MetricFamily[]

interface AlertRule {
  alert?: string
  record?: string
  expr?: string
  for?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}
interface RuleFile { groups: Array<{ name: string, rules: AlertRule[] }> }

interface DatasourceRef { type?: string, uid?: string }
interface Target { refId: string, expr: string, datasource?: DatasourceRef, legendFormat?: string }
interface Panel {
  id: number
  type: string
  title: string
  datasource?: DatasourceRef
  targets?: Target[]
  gridPos: { h: number, w: number, x: number, y: number }
  fieldConfig?: { defaults?: { unit?: string } }
}
interface TemplateVariable {
  name: string
  type: string
  query?: string | { query: string }
  datasource?: DatasourceRef
  includeAll?: boolean
}
interface Dashboard {
  uid: string
  title: string
  schemaVersion: number
  templating: { list: TemplateVariable[] }
  panels: Panel[]
}

interface ComposeService {
  image?: string
  build?: unknown
  profiles?: string[]
  command?: string[]
  environment?: Record<string, string>
  ports?: string[]
  expose?: string[]
  volumes?: string[]
  depends_on?: string[] | Record<string, unknown>
}
interface Compose { services: Record<string, ComposeService>, volumes?: Record<string, unknown> }

interface PrometheusConfig {
  global?: { scrape_interval?: string }
  rule_files?: string[]
  scrape_configs: Array<{
    job_name: string
    metrics_path?: string
    scrape_interval?: string
    dns_sd_configs?: Array<{ names: string[], type?: string, port?: number }>
    static_configs?: Array<{ targets: string[] }>
  }>
}

const alerts = () => readYaml(new URL('alerts.yml', OBSERVABILITY)) as RuleFile
const dashboard = () => JSON.parse(readText(new URL('grafana/dashboards/plantstore.json', OBSERVABILITY))) as Dashboard
const compose = () => readYaml(new URL('compose.yaml', ROOT)) as Compose
const prometheusConfig = () => readYaml(new URL('prometheus.yml', OBSERVABILITY)) as PrometheusConfig

// --- PromQL: the metric names and label names an expression uses -------------------------------------

/** Words of PromQL that look like metric names but are not. */
const PROMQL_KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring',
  'group_left', 'group_right', 'inf', 'nan', 'atan2'])

interface PromqlNames { metrics: Set<string>, labels: Set<string> }

/**
 * The metric names and label names a PromQL expression refers to. Not a full parser: enough for the
 * expressions of a dashboard and rule file (selectors with matchers, ranges, grouping clauses, functions,
 * Grafana's `$variables`), and checked on examples below.
 */
function promqlNames (expression: string): PromqlNames {
  const labels = new Set<string>()
  let rest = expression
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{([^}]*)\}/g, (_match, matchers: string) => {
      for (const [, label] of matchers.matchAll(/([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)/g)) labels.add(label as string)
      return ' '
    })
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_match, list: string) => {
      for (const label of list.split(',').map((name) => name.trim()).filter((name) => name !== '')) labels.add(label)
      return ' '
    })
    .replace(/\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*/g, ' ')
  // Numbers and durations (0.99, 1e3, 5m) before names, so their letters are not taken for names.
  rest = rest.replace(/(?<![A-Za-z0-9_:])(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?[a-z]*/gi, ' ')
  const metrics = new Set<string>()
  for (const match of rest.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const name = match[0]
    const after = rest.slice((match.index ?? 0) + name.length)
    if (/^\s*\(/.test(after)) continue // a function or an aggregation
    if (PROMQL_KEYWORDS.has(name.toLowerCase())) continue
    metrics.add(name)
  }
  return { metrics, labels }
}

/** Every PromQL expression of the dashboard, with where it is. */
function dashboardExpressions (board: Dashboard): Array<{ where: string, expr: string }> {
  const expressions = board.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({
    where: `panel "${panel.title}" target ${target.refId}`, expr: target.expr
  })))
  for (const variable of board.templating.list) {
    if (variable.type !== 'query') continue
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query ?? ''
    // label_values(metric, label): the metric must exist, and the label too.
    const labelValues = /^label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$/.exec(query)
    expressions.push({
      where: `variable $${variable.name}`,
      expr: labelValues === null ? query : `sum by (${labelValues[2]}) (${labelValues[1]})`
    })
  }
  return expressions
}

function alertExpressions (rules: RuleFile): Array<{ where: string, expr: string }> {
  return rules.groups.flatMap((group) => group.rules.map((rule) => ({ where: `alert ${rule.alert ?? rule.record}`, expr: rule.expr ?? '' })))
}

// --- A real scrape of the service ----------------------------------------------------------------------

/** The series Prometheus itself adds to every target. */
const PROMETHEUS_SERIES = new Set(['up', 'scrape_duration_seconds', 'scrape_samples_scraped'])
/** The labels Prometheus adds to every series of a target, and the bucket label of histograms. */
const TARGET_LABELS = ['job', 'instance']

interface Exposed {
  /** Every series name, histograms as their _bucket, _sum and _count. */
  names: Set<string>
  /** The label names seen on each series name. */
  labelsOf: Map<string, Set<string>>
}

/**
 * Adds what one exposition lists. The names come from the parsed families (a histogram is its _bucket,
 * _sum and _count series). The labels come from a second parse without the `# TYPE` lines, where every
 * series is a family of its own: parse-prometheus-text-format 1.1 merges the series of a labelled
 * histogram into one and drops their labels.
 */
function exposedBy (exposition: string, into: Exposed): void {
  for (const family of parsePrometheusText(exposition)) {
    const seriesNames = family.type === 'HISTOGRAM'
      ? [`${family.name}_bucket`, `${family.name}_sum`, `${family.name}_count`]
      : family.type === 'SUMMARY' ? [family.name, `${family.name}_sum`, `${family.name}_count`] : [family.name]
    for (const name of seriesNames) into.names.add(name)
  }
  for (const series of parsePrometheusText(exposition.replace(/^# TYPE .*$/gm, ''))) {
    const labels = into.labelsOf.get(series.name) ?? new Set<string>()
    for (const sample of series.metrics) for (const label of Object.keys(sample.labels ?? {})) labels.add(label)
    into.labelsOf.set(series.name, labels)
  }
}

async function until<T> (what: string, attempt: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const result = await attempt().catch(() => undefined)
    if (result !== undefined) return result
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const ADMIN_TOKEN = 'observability-admin-token'
const WRITER_TOKEN = 'observability-writer-token'

/**
 * Starts the built service on the given database with the admin listener on, makes every kind of request
 * the dashboard breaks down (creates, reads, a list, a change, a delete, a 404, an unknown path, a 401) and
 * a webhook delivery to a receiver started here, and returns what /metrics then lists.
 */
async function scrapeAfterTraffic (databaseUrl: string): Promise<string> {
  const received: string[] = []
  const receiver = createServer((request, response) => {
    request.resume().on('end', () => {
      received.push(String(request.headers['webhook-id']))
      response.writeHead(204).end()
    })
  })
  const receiverPort = await listenOnLoopback(receiver)
  const provider = await startIdentityProvider({ keys: [await generateSigningKey('ES256', 'observability')] })
  onTestFinished(() => provider.close())
  const metricsPort = await freePort()
  const server = await startServer({
    DATABASE_URL: databaseUrl,
    METRICS_PORT: String(metricsPort),
    PLANTSTORE_TOKENS: `name=admin;scopes=admin;${ADMIN_TOKEN},name=writer;scopes=plants:read+plants:write;${WRITER_TOKEN}`,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    AUTH_JWT_ISSUER: provider.issuer,
    AUTH_JWT_AUDIENCE: TEST_AUDIENCE
  })
  const call = async (method: string, path: string, token: string | undefined, body?: unknown) => {
    const response = await fetch(`${server.baseUrl}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': path.startsWith('/plants/') && method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    await response.arrayBuffer()
    return response.status
  }

  expect(await call('POST', '/admin/webhooks', ADMIN_TOKEN, { url: `http://127.0.0.1:${receiverPort}/hook` })).toBe(201)
  expect(await call('POST', '/plants', WRITER_TOKEN, { id: 1, name: 'fern' })).toBe(200)
  expect(await call('POST', '/plants', WRITER_TOKEN, { id: 2, name: 'moss', tag: 'green' })).toBe(200)
  expect(await call('GET', '/plants/1', WRITER_TOKEN)).toBe(200)
  expect(await call('GET', '/plants?limit=10', WRITER_TOKEN)).toBe(200)
  expect(await call('PUT', '/plants/2', WRITER_TOKEN, { name: 'moss', tag: 'damp' })).toBe(200)
  expect(await call('PATCH', '/plants/2', WRITER_TOKEN, { tag: null })).toBe(200)
  expect(await call('DELETE', '/plants/1', WRITER_TOKEN)).toBe(204)
  expect(await call('GET', '/plants/404', WRITER_TOKEN)).toBe(404)
  expect(await call('GET', '/no-such-path', WRITER_TOKEN)).toBe(404)
  expect(await call('GET', '/plants', undefined)).toBe(401)
  expect(await call('GET', '/plants', await provider.sign(claimsFor(provider)))).toBe(200)

  const scrape = async () => {
    const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
    expect(response.status).toBe(200)
    return await response.text()
  }
  // The deliveries go out within about half a second of their commits.
  return until('the webhook deliveries to show in /metrics', async () => {
    const exposition = await scrape()
    return received.length >= 4 && /^plantstore_webhook_deliveries_total\{result="delivered"\} [1-9]/m.test(exposition) ? exposition : undefined
  })
}

// --- The tests -------------------------------------------------------------------------------------------

describe('the PromQL name extraction this test relies on', () => {
  it('finds metric names and labels, and skips functions, keywords, numbers, strings and variables', () => {
    const names = promqlNames(
      'histogram_quantile(0.99, sum by (le, route) (rate(http_request_duration_seconds_bucket{instance=~"$instance", status_code=~"5..|x_y"}[$__rate_interval]))) ' +
      '/ on(job) group_left(version) max without (state) (plantstore_build_info offset 5m) > bool 1e3 and up == 0 or vector(0)'
    )
    expect([...names.metrics].sort()).toEqual(['http_request_duration_seconds_bucket', 'plantstore_build_info', 'up'])
    expect([...names.labels].sort()).toEqual(['instance', 'job', 'le', 'route', 'state', 'status_code', 'version'])
    expect(promqlNames('sum(rate(a_total[5m])) / sum(rate(b:c{x="1"}[1h30m]))')).toEqual({ metrics: new Set(['a_total', 'b:c']), labels: new Set(['x']) })
  })
})

describe('the alerting rules (deploy/observability/alerts.yml)', () => {
  it('are alerts with an expression, a duration, a severity, a summary and a description, each named once', () => {
    const rules = alerts().groups.flatMap((group) => group.rules)
    expect(rules.length).toBeGreaterThanOrEqual(8)
    for (const rule of rules) {
      expect(rule.alert, JSON.stringify(rule)).toMatch(/^Plantstore[A-Z][A-Za-z0-9]+$/)
      expect(rule.expr?.trim(), rule.alert).not.toBe('')
      expect(rule.for, rule.alert).toMatch(/^\d+[smh]$/)
      expect(['critical', 'warning', 'info'], rule.alert).toContain(rule.labels?.severity)
      expect(rule.annotations?.summary?.trim(), rule.alert).not.toBe('')
      expect(rule.annotations?.description?.trim(), rule.alert).not.toBe('')
    }
    const names = rules.map((rule) => rule.alert)
    expect(new Set(names).size).toBe(names.length)
  })

  it('cover the error rate, p99 latency, shedding, readiness and the webhook backlog and deliveries', () => {
    const rules = alerts().groups.flatMap((group) => group.rules)
    const uses = (pattern: RegExp) => rules.filter((rule) => pattern.test(rule.expr ?? '')).map((rule) => rule.alert)
    expect(uses(/status_code=~"5\.\."/)).not.toEqual([])
    expect(uses(/histogram_quantile\(0\.99,[\s\S]*http_request_duration_seconds_bucket/)).not.toEqual([])
    expect(uses(/rate\(plantstore_http_requests_shed_total/)).not.toEqual([])
    expect(uses(/^up\{job="plantstore"\} == 0$/)).not.toEqual([])
    expect(uses(/plantstore_store_up\{[^}]*\} == 0/)).not.toEqual([])
    expect(uses(/plantstore_webhook_backlog_events/)).not.toEqual([])
    expect(uses(/plantstore_webhook_backlog_oldest_age_seconds/)).not.toEqual([])
    expect(uses(/plantstore_webhook_deliveries_total\{[^}]*result=/)).not.toEqual([])
    // Scoped to the scrape job, so other services' http_request_duration_seconds do not fire them.
    for (const rule of rules) expect(rule.expr, rule.alert).toContain(`job="${SCRAPE_JOB}"`)
  })

  it('each have a promtool unit test where they fire and one where they stay quiet (alerts.test.yml)', () => {
    const unitTests = readYaml(new URL('alerts.test.yml', OBSERVABILITY)) as {
      rule_files: string[]
      tests: Array<{ alert_rule_test: Array<{ alertname: string, exp_alerts?: unknown[] }> }>
    }
    expect(unitTests.rule_files).toEqual(['alerts.yml'])
    const cases = unitTests.tests.flatMap((test) => test.alert_rule_test)
    for (const { alert } of alerts().groups.flatMap((group) => group.rules)) {
      const outcomes = cases.filter((one) => one.alertname === alert).map((one) => (one.exp_alerts ?? []).length > 0)
      expect(outcomes, alert).toContain(true)
      expect(outcomes, alert).toContain(false)
    }
  })
})

describe('the Grafana dashboard (deploy/observability/grafana/dashboards/plantstore.json)', () => {
  it('has a uid and title, a data source variable and an instance variable', () => {
    const board = dashboard()
    expect(board.uid).toBe('plantstore')
    expect(board.title).toBe('plantstore')
    expect(board.schemaVersion).toBeGreaterThanOrEqual(36)
    const variables = Object.fromEntries(board.templating.list.map((variable) => [variable.name, variable]))
    expect(variables.datasource).toMatchObject({ type: 'datasource', query: 'prometheus' })
    expect(variables.instance).toMatchObject({ type: 'query', datasource: DATASOURCE, includeAll: true })
  })

  it('queries through the data source variable in every panel and target, filtered by the instance variable', () => {
    const board = dashboard()
    const ids = board.panels.map((panel) => panel.id)
    expect(new Set(ids).size).toBe(ids.length)
    const queried = board.panels.filter((panel) => panel.type !== 'row')
    expect(queried.length).toBeGreaterThanOrEqual(15)
    for (const panel of queried) {
      expect(panel.datasource, panel.title).toEqual(DATASOURCE)
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0)
      for (const target of panel.targets ?? []) {
        expect(target.datasource, `${panel.title} ${target.refId}`).toEqual(DATASOURCE)
        for (const selector of target.expr.match(/[a-z_:][a-z0-9_:]*\{[^}]*\}/g) ?? []) {
          expect(selector, `${panel.title} ${target.refId}`).toContain('instance=~"$instance"')
        }
        expect(target.expr, `${panel.title} ${target.refId}`).not.toMatch(/\[\d+[smh]\]/) // $__rate_interval, not a fixed window
      }
      const { x, y, w, h } = panel.gridPos
      expect(x + w, panel.title).toBeLessThanOrEqual(24)
      expect(y >= 0 && h > 0, panel.title).toBe(true)
    }
  })

  it('has the panels an operator looks for', () => {
    const exprs = dashboard().panels.map((panel) => ({ title: panel.title, all: (panel.targets ?? []).map((target) => target.expr).join('\n') }))
    const panelWith = (pattern: RegExp) => exprs.filter(({ all }) => pattern.test(all)).map(({ title }) => title)
    expect(panelWith(/sum by \(method, route, status_code\) \(rate\(http_request_duration_seconds_count/)).not.toEqual([])
    for (const quantile of ['0.5', '0.95', '0.99']) {
      expect(panelWith(new RegExp(`histogram_quantile\\(${quantile}, sum by \\(le, method, route\\)`))).not.toEqual([])
    }
    for (const metric of ['plantstore_http_requests_in_flight', 'plantstore_http_requests_shed_total',
      'plantstore_store_operation_duration_seconds_bucket', 'plantstore_store_write_batch_size_bucket',
      'plantstore_store_write_batch_duration_seconds_bucket', 'plantstore_postgres_pool_connections',
      'plantstore_postgres_pool_waiting_queries', 'plantstore_postgres_pool_max_connections',
      'plantstore_webhook_backlog_events', 'plantstore_webhook_backlog_oldest_age_seconds',
      'plantstore_webhook_deliveries_total', 'process_cpu_seconds_total', 'process_resident_memory_bytes',
      'nodejs_eventloop_lag_p99_seconds', 'plantstore_store_up']) {
      expect(panelWith(new RegExp(`\\b${metric}\\b`)), metric).not.toEqual([])
    }
  })
})

describe('the compose profile and the provisioning files', () => {
  it('runs Prometheus and Grafana only with the observability profile, on pinned images', () => {
    const { services } = compose()
    expect(services.prometheus?.profiles).toEqual([PROFILE])
    expect(services.grafana?.profiles).toEqual([PROFILE])
    expect(services.prometheus?.image).toMatch(/^prom\/prometheus:v\d+\.\d+\.\d+$/)
    expect(services.grafana?.image).toMatch(/^grafana\/grafana:\d+\.\d+\.\d+$/)
    // The service and its database start without the profile, as before.
    expect(services.plantstore?.profiles).toBeUndefined()
    expect(services.postgres?.profiles).toBeUndefined()
  })

  it('lets Prometheus reach the admin listener inside the compose network without publishing it', () => {
    const { services } = compose()
    const plantstore = services.plantstore as ComposeService
    const metricsPort = plantstore.environment?.METRICS_PORT
    expect(metricsPort).toBe('9464')
    expect(plantstore.expose).toContain(metricsPort)
    expect(plantstore.ports ?? []).toEqual(['3000'])
    // The admin listener binds HOST: the image sets 0.0.0.0, and the compose file does not change it.
    expect(readText(new URL('Dockerfile', ROOT))).toMatch(/^\s*HOST=0\.0\.0\.0 \\$/m)
    expect(plantstore.environment?.HOST).toBeUndefined()

    const config = prometheusConfig()
    const job = config.scrape_configs.find((scrape) => scrape.job_name === SCRAPE_JOB)
    expect(job?.metrics_path ?? '/metrics').toBe('/metrics')
    expect(job?.dns_sd_configs).toEqual([expect.objectContaining({ names: ['plantstore'], type: 'A', port: Number(metricsPort) })])
    const interval = Number(/^(\d+)s$/.exec(job?.scrape_interval ?? config.global?.scrape_interval ?? '')?.[1])
    expect(interval >= 5 && interval <= 15, `scrape interval ${interval}`).toBe(true)
    // Published on loopback only: the dashboards are open to anonymous viewers.
    for (const name of ['prometheus', 'grafana']) {
      for (const port of services[name]?.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:/)
    }
  })

  it('mounts the files where Prometheus and Grafana are told to read them', () => {
    const { services } = compose()
    const mounts = (service: ComposeService) => new Map((service.volumes ?? [])
      .map((volume) => volume.split(':'))
      .filter(([source]) => source?.startsWith('./'))
      .map(([source, target]) => [target as string, fileURLToPath(new URL(source as string, ROOT))]))

    const prometheus = services.prometheus as ComposeService
    const prometheusMounts = mounts(prometheus)
    const configPath = prometheus.command?.find((argument) => argument.startsWith('--config.file='))?.split('=')[1]
    expect(prometheusMounts.get(configPath as string)).toBe(fileURLToPath(new URL('prometheus.yml', OBSERVABILITY)))
    const ruleFiles = prometheusConfig().rule_files ?? []
    expect(ruleFiles).toHaveLength(1)
    expect(prometheusMounts.get(ruleFiles[0] as string)).toBe(fileURLToPath(new URL('alerts.yml', OBSERVABILITY)))

    const grafana = services.grafana as ComposeService
    const grafanaMounts = mounts(grafana)
    const provisioning = grafanaMounts.get('/etc/grafana/provisioning')
    expect(provisioning).toBe(fileURLToPath(new URL('grafana/provisioning', OBSERVABILITY)))
    const datasources = readYaml(new URL('grafana/provisioning/datasources/prometheus.yml', OBSERVABILITY)) as {
      datasources: Array<{ type: string, url: string, isDefault?: boolean }>
    }
    expect(datasources.datasources).toEqual([expect.objectContaining({ type: 'prometheus', url: 'http://prometheus:9090', isDefault: true })])
    expect(prometheus.ports).toEqual([expect.stringMatching(/:9090$/)])

    const providers = readYaml(new URL('grafana/provisioning/dashboards/plantstore.yml', OBSERVABILITY)) as {
      providers: Array<{ type: string, options: { path: string } }>
    }
    expect(providers.providers).toHaveLength(1)
    const dashboardsPath = providers.providers[0]?.options.path as string
    const dashboardsFolder = grafanaMounts.get(dashboardsPath) as string
    expect(dashboardsFolder).toBe(fileURLToPath(new URL('grafana/dashboards', OBSERVABILITY)))
    expect(statSync(posix.join(dashboardsFolder, 'plantstore.json')).isFile()).toBe(true)
    const home = grafana.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH as string
    expect(posix.dirname(home)).toBe(dashboardsPath)
    expect(existsSync(posix.join(dashboardsFolder, posix.basename(home)))).toBe(true)
    // Every named volume a service uses is declared.
    for (const service of Object.values(services)) {
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0] as string
        if (!source.startsWith('./') && !source.startsWith('/')) expect(Object.keys(compose().volumes ?? {})).toContain(source)
      }
    }
  })
})

describe('the metrics the dashboard and the alerts query', () => {
  it('are all exposed by the service, with the labels they use (a real scrape on SQLite and on PostgreSQL)', { timeout: 90_000 }, async () => {
    const exposed: Exposed = { names: new Set(PROMETHEUS_SERIES), labelsOf: new Map() }
    exposedBy(await scrapeAfterTraffic(`sqlite:${join(temporaryFolder(), 'plantstore.db')}`), exposed)
    exposedBy(await scrapeAfterTraffic(await createTestDatabase()), exposed)

    const expressions = [...dashboardExpressions(dashboard()), ...alertExpressions(alerts())]
    const problems: string[] = []
    for (const { where, expr } of expressions) {
      const { metrics, labels } = promqlNames(expr)
      if (metrics.size === 0) problems.push(`${where}: no metric in ${expr}`)
      const known = new Set(TARGET_LABELS)
      for (const metric of metrics) {
        if (!exposed.names.has(metric)) problems.push(`${where}: ${metric} is not exposed`)
        for (const label of exposed.labelsOf.get(metric) ?? []) known.add(label)
      }
      for (const label of labels) if (!known.has(label)) problems.push(`${where}: no queried metric has the label ${label}`)
    }
    expect(problems).toEqual([])
  })
})
