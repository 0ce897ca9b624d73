import { join } from 'node:path'
import { median, record, summarize, type Sample, type Samples } from '../figures.js'
import { CONNECTIONS, regimeLine, type Harness, type Part } from '../harness.js'
import { mainThreadCpuSeconds, processCpuSeconds, serverPid, type Target } from '../processes.js'
import { asJson, describeRounds, formatTable, generatorCell, ratioRange, writeResultsFile } from '../report.js'

/**
 * `--only batch`: what `POST /plants/batch` buys a client that writes many plants (issue 36). On SQLite
 * and PostgreSQL, one service each on an empty store, 50 connections: single `POST /plants` against
 * batches of 1, 10, 100 and 1000 creates of new plants, in interleaved rounds (the order reversed every
 * other round). Plants per second and server CPU per plant (the database's too, on PostgreSQL), each
 * batch size's ratio to the single POSTs the median of the rounds' own ratios. Then a batch of 1000 on
 * SQLite alone (one connection): its p99. Figures go to bench/results/batch.json.
 */

const BATCH_SIZES = [1, 10, 100, 1000] as const
const ENGINES = ['sqlite', 'postgres'] as const
type Engine = typeof ENGINES[number]
/** The issue's goals: batches of 100 and more at 4× the single POSTs' plants per second; a lone 1000-operation batch's p99 under 100 ms on SQLite. */
const RATE_GOAL = 4
const RATE_GOAL_FROM_SIZE = 100
const ALONE_P99_GOAL_MS = 100
const ALONE_SIZE = 1000

type BatchLoad = 'post' | `batch-${number}`
const loadsOf = (): BatchLoad[] => ['post', ...BATCH_SIZES.map((size): BatchLoad => `batch-${size}`)]
const sizeOf = (load: BatchLoad) => load === 'post' ? 1 : Number(load.slice('batch-'.length))

/** A sample's figures per plant: a batch's request writes `size` plants. */
function perPlant (sample: Sample, size: number) {
  return { plantsPerSecond: sample.rps * size, serverCpuUsPerPlant: sample.serverCpuUs / size, databaseCpuUsPerPlant: sample.databaseCpuUs / size }
}

interface BatchRow {
  readonly engine: Engine
  readonly load: BatchLoad
  readonly plantsPerSecond: number
  readonly requestsPerSecond: number
  readonly serverCpuUsPerPlant: number
  /** Of serverCpuUsPerPlant, the main thread's. */
  readonly mainThreadCpuUsPerPlant: number
  readonly databaseCpuUsPerPlant: number
  /** Plants per second ÷ the single POSTs', the median of the rounds' ratios, and their range. */
  readonly ratio: number
  readonly ratioRange: string
  readonly p99Ms: number
  readonly errors: number
  readonly generatorCpuShare: number
  readonly valid: boolean
}

/**
 * One measurement, once the service has finished the requests of the one before: when wrk stops, up to
 * 50 batches of 1000 it sent are still being written, and the next load would wait behind them.
 */
async function measure (harness: Harness, target: Target, load: BatchLoad, seconds: number, connections = CONNECTIONS): Promise<BatchSample> {
  await settled(target)
  const pid = serverPid(target) as number
  const before = mainThreadCpuSeconds(pid)
  const sample = load === 'post'
    ? await harness.measure(target, 'post', seconds, undefined, connections)
    : await harness.measure(target, 'batch', seconds, undefined, connections, sizeOf(load))
  const after = mainThreadCpuSeconds(pid)
  return { ...sample, mainThreadShare: (after.main - before.main) / (after.all - before.all) }
}

/** A sample, and the share of the server's CPU its main thread spent (the rest: the SQLite writer, the pool's sockets). */
type BatchSample = Sample & { readonly mainThreadShare: number }

/** Resolves once the service spent under 5 % of a core over 200 ms (at most 30 s). */
async function settled (target: Target): Promise<void> {
  const pid = serverPid(target) as number
  const window = 200
  for (const started = Date.now(); Date.now() - started < 30_000;) {
    const before = processCpuSeconds(pid)
    await new Promise((resolve) => setTimeout(resolve, window))
    if ((processCpuSeconds(pid) - before) * 1000 / window < 0.05) return
  }
  throw new Error(`${target.name} stayed busy for 30 s after a measurement`)
}

async function measureEngine (harness: Harness, engine: Engine): Promise<BatchRow[]> {
  const databaseUrl = engine === 'sqlite' ? `sqlite:${join(harness.workFolder, 'batch.db')}` : await harness.postgresDatabase()
  const target = await harness.servers.startService(`${engine}-batch`, databaseUrl)
  const samples: Samples = new Map()
  const mainShares = new Map<string, number[]>()
  try {
    for (const load of loadsOf()) await measure(harness, target, load, 1)
    for (let round = 1; round <= harness.rounds; round++) {
      const loads = loadsOf()
      for (const load of round % 2 === 1 ? loads : loads.reverse()) {
        const sample = await measure(harness, target, load, harness.durationSeconds)
        const key = `${engine}/${load}`
        record(samples, key, sample)
        mainShares.set(key, [...(mainShares.get(key) ?? []), sample.mainThreadShare])
        harness.logSample(round, key, sample)
      }
    }
  } finally {
    await harness.servers.stop(target)
  }
  const singles = samples.get(`${engine}/post`) ?? []
  return loadsOf().map((load) => {
    const size = sizeOf(load)
    const own = samples.get(`${engine}/${load}`) ?? []
    const ratios = own.map((sample, index) => perPlant(sample, size).plantsPerSecond / (singles[index]?.rps ?? NaN))
    const summary = summarize(own, 1)
    const serverCpuUsPerPlant = median(own.map((sample) => perPlant(sample, size).serverCpuUsPerPlant))
    return {
      engine,
      load,
      plantsPerSecond: Math.round(median(own.map((sample) => perPlant(sample, size).plantsPerSecond))),
      requestsPerSecond: summary.rps,
      serverCpuUsPerPlant: Number(serverCpuUsPerPlant.toFixed(1)),
      mainThreadCpuUsPerPlant: Number((serverCpuUsPerPlant * median(mainShares.get(`${engine}/${load}`) ?? [])).toFixed(1)),
      databaseCpuUsPerPlant: Number(median(own.map((sample) => perPlant(sample, size).databaseCpuUsPerPlant)).toFixed(1)),
      ratio: Number(median(ratios).toFixed(2)),
      ratioRange: ratioRange(ratios),
      p99Ms: summary.p99,
      errors: summary.errors,
      generatorCpuShare: summary.generatorCpuShare,
      valid: summary.valid
    }
  })
}

/** Batches of ALONE_SIZE creates on SQLite, one at a time: their latency with nothing else to wait for. */
async function measureAlone (harness: Harness) {
  const target = await harness.servers.startService('sqlite-batch-alone', `sqlite:${join(harness.workFolder, 'batch-alone.db')}`)
  const samples: BatchSample[] = []
  try {
    await measure(harness, target, `batch-${ALONE_SIZE}`, 1, 1)
    for (let round = 1; round <= harness.rounds; round++) {
      const sample = await measure(harness, target, `batch-${ALONE_SIZE}`, harness.durationSeconds, 1)
      harness.logSample(round, `sqlite/batch-${ALONE_SIZE} alone`, sample)
      samples.push(sample)
    }
  } finally {
    await harness.servers.stop(target)
  }
  const summary = summarize(samples, 1)
  return {
    size: ALONE_SIZE,
    p50Ms: summary.p50,
    p99Ms: summary.p99,
    worstP99Ms: Math.max(...samples.map((sample) => sample.p99)),
    batchesPerSecond: summary.rps,
    serverCpuUsPerPlant: Number((summary.serverCpuUs / ALONE_SIZE).toFixed(1)),
    errors: summary.errors,
    generatorCpuShare: summary.generatorCpuShare,
    valid: summary.valid
  }
}

function printTables (harness: Harness, rows: readonly BatchRow[], alone: Awaited<ReturnType<typeof measureAlone>>): void {
  const header = ['engine', 'load', 'plants/s', 'req/s', 'µs CPU/plant', 'main thread', 'db µs/plant', '÷ POST', 'per-round ÷', 'p99 ms', 'errors',
    `${harness.generator.name} CPU`, `≥ ${RATE_GOAL}×`]
  const lines = rows.map((row) => [row.engine, row.load, String(row.plantsPerSecond), String(row.requestsPerSecond), row.serverCpuUsPerPlant.toFixed(1),
    row.mainThreadCpuUsPerPlant.toFixed(1), row.engine === 'postgres' ? row.databaseCpuUsPerPlant.toFixed(1) : '', row.ratio.toFixed(2), row.ratioRange, String(row.p99Ms), String(row.errors),
    generatorCell(row.generatorCpuShare, row.valid), sizeOf(row.load) >= RATE_GOAL_FROM_SIZE ? (row.ratio >= RATE_GOAL ? 'yes' : 'no') : ''])
  process.stdout.write(`\nBatches of creates against single POSTs, ${CONNECTIONS} connections; medians of ${describeRounds(harness.rounds, harness.durationSeconds)}, ` +
    `÷ POST the median of each round's plants/s ratio\n${formatTable(header, lines, 2)}\n`)
  process.stdout.write(`\nA batch of ${alone.size} creates on SQLite, alone (1 connection): p50 ${alone.p50Ms} ms, p99 ${alone.p99Ms} ms (worst round ${alone.worstP99Ms} ms; ` +
    `goal < ${ALONE_P99_GOAL_MS} ms: ${alone.p99Ms < ALONE_P99_GOAL_MS ? 'yes' : 'no'}), ${alone.batchesPerSecond} batches/s, ${alone.serverCpuUsPerPlant} µs CPU per plant, ` +
    `${harness.generator.name} ${generatorCell(alone.generatorCpuShare, alone.valid)}\n`)
}

export const batchPart: Part = {
  name: 'batch',
  owns: () => false,
  async compare (harness) {
    const rows: BatchRow[] = []
    for (const engine of ENGINES) rows.push(...await measureEngine(harness, engine))
    const alone = await measureAlone(harness)
    printTables(harness, rows, alone)
    const regime = await harness.regime()
    const written = writeResultsFile(`batch${harness.quick ? '-quick' : ''}.json`, asJson({ machine: harness.machine(), regime, regimeLine: regimeLine(regime).trim(), rows, alone }))
    process.stdout.write(`\nwrote ${written}\n`)
    return []
  }
}
