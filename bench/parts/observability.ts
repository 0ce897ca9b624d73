import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { SATURATED_GENERATOR, median, record, roundRatios, summarize, type Row, type Sample, type Samples } from '../figures.js'
import { PRELOADED, type Harness, type Part } from '../harness.js'
import { processCpuSeconds, serverPid, type ServerProcesses, type Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'

const METRICS_OFF = 'metrics-off'
const METRICS_ON = 'metrics-on'
const TRACING_ON = 'tracing-on'
const RELEASE = 'release'
const OBSERVABILITY_LOADS = ['post', 'get'] as const
/** The issue's bound: metrics on (the default) cost at most 5 % of POST and GET throughput; here also of CPU per request. */
const METRICS_TOLERANCE = 0.05
/**
 * Many short rounds, each ratio the median of the rounds' own ratios; more than the other parts
 * have, as each round's new processes differ by up to a tenth among themselves.
 */
const OBSERVABILITY_ROUNDS = 15
/** Scrapes timed one after another on an idle service, for the CPU time of one. */
const TIMED_SCRAPES = 200

interface SinkCounts {
  readonly requests: number
  readonly bytes: number
  readonly spans: number
  readonly byName: Readonly<Record<string, number>>
  readonly refused: number
}

/**
 * What metrics and tracing cost a request. SQLite services of this build, each with its own file:
 * metrics off (METRICS_PORT=0, no OTEL_* variable: the reference), metrics on (the shipped default,
 * tracing off), and metrics on with tracing at 100 % sampling (OTEL_TRACES_SAMPLER=always_on),
 * exporting OTLP/HTTP (protobuf, the default) to `bench/otlp-sink.ts`, which runs on the load
 * generator's core, counts spans and discards them. With `--baseline-dist` a `release` service runs
 * another build's dist/server.js in the same rounds: whether tracing off costs anything against a
 * release without any of it. POST of new plants and GET by id of the 2000 preloaded ones in
 * interleaved rounds, each round with new processes on the same files (warmed up for 1 s a load), the
 * order of the services reversed every other round; ratios are medians of each round's own ratio to
 * metrics off. The sink's CPU share is recorded next to wrk's: both take
 * the same core, and their sum decides whether the tracing measurement is valid.
 */
export async function compareObservability (harness: Harness): Promise<Row[]> {
  const { servers, releaseRoot } = harness
  const observabilityRounds = harness.roundsOf(OBSERVABILITY_ROUNDS)
  process.stderr.write(`observability: load average ${loadavg().map((load) => load.toFixed(2)).join(' ')} at the start\n`)
  const sink = await servers.start('otlp-sink', [process.execPath, '--import', 'tsx', 'bench/otlp-sink.ts'], {}, 1)
  const sinkPid = serverPid(sink) as number
  const services: ReadonlyArray<{ readonly name: string, readonly env: Record<string, string>, readonly root?: string }> = [
    { name: METRICS_OFF, env: { METRICS_PORT: '0' } },
    { name: METRICS_ON, env: {} },
    { name: TRACING_ON, env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER: 'always_on' } },
    ...(releaseRoot === undefined ? [] : [{ name: RELEASE, env: {}, root: releaseRoot }])
  ]
  // Every service's POST ids go on rising from round to round: each round's processes open the files of the round before.
  const nextIds = new Map(services.map((service) => [service.name, 1_000_000_000_000n]))
  // Requests the tracing services answered, by load, for the spans the sink should have got; and the
  // POSTs the last metrics-on process answered, for its request counter.
  const traced = { post: PRELOADED, get: 0 }
  let metricsOnPosts = 0
  const count = (target: Target, load: typeof OBSERVABILITY_LOADS[number], sample: Sample) => {
    if (target.name === TRACING_ON) traced[load] += sample.requests
    if (target.name === METRICS_ON && load === 'post') metricsOnPosts += sample.requests
  }

  const samples: Samples = new Map()
  const sinkShares: Record<typeof OBSERVABILITY_LOADS[number], number[]> = { post: [], get: [] }
  let scrape: ScrapeFigures & { postsAnswered: number } | undefined
  for (let round = 1; round <= observabilityRounds; round++) {
    // New processes every round: a process's own state (its heap's sizing, and more not found) moved a service's
    // CPU a request by up to a sixth against another's for a whole run, in either direction
    // (bench/results/2026-11-23-2142-issue-14-observability.md); across rounds it is drift that the medians absorb.
    const targets: Target[] = []
    for (const service of services) {
      const target = await servers.startService(service.name, `sqlite:${join(harness.workFolder, `${service.name}.db`)}`, service.env, service.root)
      targets.push(target)
      target.nextId = nextIds.get(service.name) ?? target.nextId
      if (round === 1) await harness.preload(target, PRELOADED)
      else target.preloadedIds = Array.from({ length: PRELOADED }, (_, index) => BigInt(index + 1))
    }
    checkObservabilityConfigurations(servers, targets)
    metricsOnPosts = round === 1 ? PRELOADED : 0
    // Not recorded: each process's first requests of each load.
    for (const load of OBSERVABILITY_LOADS) {
      for (const target of targets) count(target, load, await harness.measure(target, load, 1))
    }
    for (const load of OBSERVABILITY_LOADS) {
      for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
        const sinkCpuBefore = processCpuSeconds(sinkPid)
        const startedAt = performance.now()
        const sample = await harness.measure(target, load, harness.durationSeconds)
        const sinkShare = (processCpuSeconds(sinkPid) - sinkCpuBefore) / ((performance.now() - startedAt) / 1000)
        const key = `${target.name}/${load}`
        record(samples, key, sample)
        harness.logSample(round, key, sample)
        count(target, load, sample)
        if (target.name !== TRACING_ON) continue
        sinkShares[load].push(sinkShare)
        process.stderr.write(`round ${round} ${key}: the OTLP sink used ${Math.round(sinkShare * 100)} % of the load generator's core\n`)
      }
    }
    const metricsOn = targets.find((target) => target.name === METRICS_ON) as Target
    if (round === observabilityRounds) scrape = { ...await scrapeFigures(metricsOn), postsAnswered: metricsOnPosts }
    // A graceful stop exports the spans still queued (for at most 2 s).
    for (const target of targets) {
      nextIds.set(target.name, target.nextId)
      await servers.stop(target)
    }
  }
  const spans = await (await fetch(`${sink.url}/count`)).json() as SinkCounts
  await servers.stop(sink)
  process.stderr.write(`observability: load average ${loadavg().map((load) => load.toFixed(2)).join(' ')} at the end\n`)
  if (scrape === undefined) throw new Error('no round was measured')

  const pairedRatios = (name: string, load: string, measure: 'rps' | 'serverCpuUs', reference: string) =>
    roundRatios(samples, `${name}/${load}`, `${reference}/${load}`, measure)
  const pairedRatio = (name: string, load: string, measure: 'rps' | 'serverCpuUs', reference = METRICS_OFF) =>
    Number(median(pairedRatios(name, load, measure, reference)).toFixed(3))
  const rows = OBSERVABILITY_LOADS.flatMap((load) => services.map((target) => {
    const measured = samples.get(`${target.name}/${load}`) ?? []
    const summary = summarize(measured, 1)
    const sinkCpuShares = target.name === TRACING_ON ? sinkShares[load] : undefined
    // The sink takes the generator's core: what that core did is wrk's share and the sink's together.
    const busiestCore = Math.max(...measured.map((sample, index) => sample.generatorCpuShare + (sinkCpuShares?.[index] ?? 0)))
    return {
      target: target.name,
      load,
      ...summary,
      valid: busiestCore < SATURATED_GENERATOR,
      ratio: pairedRatio(target.name, load, 'rps'),
      cpuRatio: pairedRatio(target.name, load, 'serverCpuUs'),
      against: METRICS_OFF,
      perRound: {
        ratio: pairedRatios(target.name, load, 'rps', METRICS_OFF).map((ratio) => Number(ratio.toFixed(3))),
        cpuRatio: pairedRatios(target.name, load, 'serverCpuUs', METRICS_OFF).map((ratio) => Number(ratio.toFixed(3))),
        generatorCpuShare: measured.map((sample) => Number(sample.generatorCpuShare.toFixed(2))),
        pageFaultsPerRequest: measured.map((sample) => Number(sample.pageFaultsPerRequest.toFixed(2))),
        ...(sinkCpuShares === undefined ? {} : { sinkCpuShare: sinkCpuShares.map((share) => Number(share.toFixed(2))) })
      },
      ...(releaseRoot === undefined || target.name === RELEASE
        ? {}
        : { againstRelease: { ratio: pairedRatio(target.name, load, 'rps', RELEASE), cpuRatio: pairedRatio(target.name, load, 'serverCpuUs', RELEASE) } }),
      ...(target.name === RELEASE && releaseRoot !== undefined ? { build: `${releaseVersion(releaseRoot)} (${releaseRoot})` } : {}),
      ...(target.name === TRACING_ON ? { exported: { ...spans, requestsAnswered: traced[load] } } : {}),
      ...(target.name === METRICS_ON && load === 'post' ? { scrape } : {})
    }
  }))
  printObservabilityTable(harness, rows, spans, traced, scrape)
  return rows
}

const releaseVersion = (root: string) => (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version

/** That each service runs as its row says: metrics on only where asked, tracing on only where asked. */
function checkObservabilityConfigurations (servers: ServerProcesses, targets: readonly Target[]): void {
  const tracingAnnounced = (target: Target) => servers.log(target).includes('tracing on')
  const named = (name: string) => targets.find((target) => target.name === name) as Target
  if (named(METRICS_OFF).metricsUrl !== undefined || named(METRICS_ON).metricsUrl === undefined || named(TRACING_ON).metricsUrl === undefined) {
    throw new Error('metrics-off must run with METRICS_PORT=0, metrics-on and tracing-on with a metrics port')
  }
  if (tracingAnnounced(named(METRICS_OFF)) || tracingAnnounced(named(METRICS_ON)) || !tracingAnnounced(named(TRACING_ON))) {
    throw new Error('tracing must be on in tracing-on only (its start logs "tracing on")')
  }
}

interface ScrapeFigures {
  /** POST /plants 200s in http_request_duration_seconds_count at the end of the rounds. */
  readonly postsCounted: number
  /** The server's CPU time for one scrape of GET /metrics, in ms: TIMED_SCRAPES in a row, timed together. */
  readonly cpuMsPerScrape: number
  readonly bytes: number
}

/**
 * That metrics-on counted its requests (the POSTs of the last round's process), and what a scrape
 * costs it: a scrape's work is per scrape, not per request, so the rounds run without one.
 */
async function scrapeFigures (target: Target): Promise<ScrapeFigures> {
  const url = `${target.metricsUrl ?? ''}/metrics`
  const text = await (await fetch(url)).text()
  const postsLine = text.split('\n').find((line) => line.startsWith('http_request_duration_seconds_count{') &&
    line.includes('method="POST"') && line.includes('route="/plants"') && line.includes('status_code="200"'))
  const pid = serverPid(target) as number
  const cpuBefore = processCpuSeconds(pid)
  for (let scrape = 0; scrape < TIMED_SCRAPES; scrape++) await (await fetch(url)).text()
  return {
    postsCounted: Number(postsLine?.split(' ').at(-1) ?? NaN),
    cpuMsPerScrape: Number(((processCpuSeconds(pid) - cpuBefore) / TIMED_SCRAPES * 1000).toFixed(2)),
    bytes: Buffer.byteLength(text)
  }
}

export function printObservabilityTable (harness: Harness, rows: Array<Row & { perRound: { ratio: number[], cpuRatio: number[], pageFaultsPerRequest: number[], sinkCpuShare?: number[] }, againstRelease?: { ratio: number, cpuRatio: number } }>,
  spans: SinkCounts, traced: { post: number, get: number }, scrape: ScrapeFigures & { postsAnswered: number }): void {
  const header = ['target', 'load', 'req/s', 'req/s ÷ off', 'per-round ÷', 'µs CPU/req', 'CPU ÷ off', 'per-round CPU ÷', 'p50 ms', 'p99 ms',
    'page faults/req', 'errors', `${harness.generator.name} CPU`, 'sink CPU', `within ${METRICS_TOLERANCE * 100} %`]
  const lines = rows.map((row) => [row.target, row.load, String(row.rps), row.ratio.toFixed(3), ratioRange(row.perRound.ratio), String(row.serverCpuUs),
    row.cpuRatio.toFixed(3), ratioRange(row.perRound.cpuRatio), String(row.p50), String(row.p99), median(row.perRound.pageFaultsPerRequest).toFixed(2), String(row.errors),
    generatorCell(row.generatorCpuShare, row.valid),
    row.perRound.sinkCpuShare === undefined ? '' : `${Math.round(Math.max(...row.perRound.sinkCpuShare) * 100)} %`,
    row.target !== METRICS_ON ? '' : row.ratio >= 1 - METRICS_TOLERANCE && row.cpuRatio <= 1 + METRICS_TOLERANCE ? 'yes' : 'no'])
  process.stdout.write(`\nSQLite, metrics and tracing; medians of ${describeRounds(harness.roundsOf(OBSERVABILITY_ROUNDS), harness.durationSeconds)}, ` +
    `ratios the medians of each round's ratio to ${METRICS_OFF}; page faults/req: the server's minor page faults ÷ requests (median); sink CPU: the OTLP sink's share of the generator's core (the highest round)\n` +
    `${formatTable(header, lines, 2)}\n`)
  const againstRelease = rows.filter((row) => row.againstRelease !== undefined)
  if (rows.some((row) => row.target === RELEASE)) {
    const build = (rows.find((row) => row.target === RELEASE) as { build?: string } | undefined)?.build ?? ''
    process.stdout.write(`against the release ${build} (medians of each round's ratio): ` +
      `${againstRelease.map((row) => `${row.target}/${row.load} ${row.againstRelease?.ratio.toFixed(3)} req/s, ${row.againstRelease?.cpuRatio.toFixed(3)} CPU`).join('; ')}\n`)
  }
  const named = (name: string) => spans.byName[name] ?? 0
  process.stdout.write(`the OTLP sink got ${spans.spans} spans in ${spans.requests} export requests (${Math.round(spans.bytes / 1e6)} MB, ` +
    `${spans.refused} refused): "POST /plants" ${named('POST /plants')} for ${traced.post} POSTs answered, "GET /plants/:id" ` +
    `${named('GET /plants/:id')} for ${traced.get} GETs; ${Object.entries(spans.byName).map(([name, count]) => `"${name}" ${count}`).join(', ')}\n`)
  process.stdout.write(`${METRICS_ON}: http_request_duration_seconds_count of POST /plants 200 was ${scrape.postsCounted} for ` +
    `${scrape.postsAnswered} POSTs answered; a scrape ` +
    `(${Math.round(scrape.bytes / 1024)} KiB) took ${scrape.cpuMsPerScrape} ms of its CPU (mean of ${TIMED_SCRAPES})\n`)
}

export const observabilityPart: Part = {
  name: 'observability',
  owns: (row) => row.against === METRICS_OFF,
  compare: compareObservability,
  rounds: (harness) => harness.roundsOf(OBSERVABILITY_ROUNDS)
}
