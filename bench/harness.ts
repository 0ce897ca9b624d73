import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres, type PostgresServer } from '../scripts/embedded-postgres.js'
import { median, type Row, type Sample } from './figures.js'
import { loadGenerator, preloadedTagOf, type Load, type LoadGenerator, type LoadSpec } from './load-generator.js'
import {
  ROOT, ServerProcesses, minorPageFaults, pinProcess, processCpuSeconds, processTreeCpuSeconds, rssMb, serverNodeFlags, serverPid,
  type Target
} from './processes.js'

/**
 * What every part of the bench shares: the run's rounds and their length, the load generator, the
 * processes, the embedded PostgreSQL, one measurement, the preload, and the machine a run describes.
 */

export const CONNECTIONS = 50
export const PRELOADED = 2000
const PRELOAD_ATTEMPTS = 5
export const LOADS: readonly Load[] = ['post', 'get', 'list']
/** The rounds of a part whose ratios are medians of per-round ratios (updates, webhooks): more than the others have. */
export const PAIRED_ROUNDS = 9

export interface HarnessOptions {
  /** `--quick`: one round of 1 s, a smoke run. */
  readonly quick: boolean
  /** `--baseline-dist`: the root of another build, whose dist/server.js the observability part measures too. */
  readonly releaseRoot?: string | undefined
}

/** One part of the bench: its measurements, and the rows of a results file that are its own. */
export interface Part {
  readonly name: string
  /** Whether a row is this part's, told by the reference its ratios are against. */
  readonly owns: (row: { against?: string }) => boolean
  readonly compare: (harness: Harness) => Promise<Row[]>
  /** The rounds recorded with a run of some parts only, where they are not the harness's. */
  readonly rounds?: (harness: Harness) => number
  /** Whether its rows are the results' chart. */
  readonly charted?: boolean
}

export type Machine = ReturnType<Harness['machine']>

/**
 * What the bare baseline's requests cost this machine during the run, in µs of CPU: the machine's
 * regime. Its speed drifts about threefold between days, and a ratio that holds on a slow day (costly
 * system calls, which the service's batching saves) can fail on a fast one, so every table is read
 * with it.
 */
export interface Regime {
  readonly postCpuUs: number
  readonly getCpuUs: number
  /** `backends` when that part's baseline measured it, `probe` when a short measurement at the start did. */
  readonly measuredBy: 'backends' | 'probe'
}

/** A day whose baseline POST costs at most this much CPU is a fast one: issue 26's targets are set on such a day. */
export const FAST_DAY_POST_CPU_US = 25
const PROBE_ROUNDS = 3
const PROBE_SECONDS = 2

export function regimeLine (regime: Regime): string {
  const day = regime.postCpuUs <= FAST_DAY_POST_CPU_US ? 'a fast day' : `not a fast day (one has a baseline POST at ${FAST_DAY_POST_CPU_US} µs or less)`
  return `regime: the baseline (bare Fastify, no logging) spent ${regime.postCpuUs.toFixed(1)} µs of CPU per POST and ` +
    `${regime.getCpuUs.toFixed(1)} per GET by id (${regime.measuredBy === 'backends' ? "the backends part's medians" : 'a probe at the start of this run'}): ${day}\n`
}

export class Harness {
  readonly quick: boolean
  readonly releaseRoot: string | undefined
  readonly rounds: number
  readonly durationSeconds: number
  /** Servers on CPU 0 and the load generator on CPU 1, where `taskset` and two CPUs are. */
  readonly pinning: boolean
  readonly generator: LoadGenerator
  readonly workFolder: string
  readonly servers: ServerProcesses
  #postgres: PostgresServer | undefined
  #regime: Regime | undefined

  constructor (options: HarnessOptions) {
    this.quick = options.quick
    this.releaseRoot = options.releaseRoot
    this.rounds = this.roundsOf(5)
    this.durationSeconds = this.quick ? 1 : 4
    this.pinning = existsSync('/usr/bin/taskset') && cpus().length >= 2
    if (this.pinning) pinProcess(process.pid, 1)
    this.generator = loadGenerator(this.pinning ? 1 : undefined)
    this.workFolder = mkdtempSync(join(tmpdir(), 'plantstore-bench-'))
    this.servers = new ServerProcesses(this.workFolder, this.pinning)
  }

  /** A part's rounds: `full` in a full run, one in a quick one. */
  roundsOf (full: number): number {
    return this.quick ? 1 : full
  }

  /** One measurement of `paths` (a `paths` load: GETs of the paths in turn from a random start), with `headers` on every request. */
  async measurePaths (target: Target, paths: readonly string[], seconds: number, headers: Readonly<Record<string, string>> = {}): Promise<Sample> {
    return this.measure(target, 'paths', seconds, undefined, CONNECTIONS, undefined, { paths, headers })
  }

  /** `batchSize`: a batch load's creates per request; `requests`: a paths load's paths and headers. */
  async measure (target: Target, load: Load, seconds: number, deepAfter?: bigint, connections = CONNECTIONS, batchSize?: number,
    requests: Pick<LoadSpec, 'paths' | 'headers'> = {}): Promise<Sample> {
    const pid = serverPid(target) as number
    let peakRss = 0
    const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMb(pid)) }, 250)
    const serverCpuBefore = processCpuSeconds(pid)
    const pageFaultsBefore = minorPageFaults(pid)
    const databaseCpuBefore = target.name.startsWith('postgres') ? this.#postgresCpuSeconds() : 0
    const firstNewId = target.nextId
    target.nextId += 100_000_000n
    const result = await this.generator.run({
      url: target.url,
      token: target.token,
      load,
      connections,
      seconds,
      firstNewId,
      preloaded: Number(target.preloadedIds.reduce((highest, id) => id > highest ? id : highest, 1n)),
      ...(deepAfter === undefined ? {} : { after: deepAfter }),
      ...(batchSize === undefined ? {} : { batchSize }),
      ...requests
    })
    const serverCpu = processCpuSeconds(pid) - serverCpuBefore
    const pageFaults = minorPageFaults(pid) - pageFaultsBefore
    const databaseCpu = target.name.startsWith('postgres') ? this.#postgresCpuSeconds() - databaseCpuBefore : 0
    clearInterval(sampler)
    peakRss = Math.max(peakRss, rssMb(pid))
    return {
      rps: result.requests / result.seconds,
      p50: result.p50Ms,
      p99: result.p99Ms,
      rssMb: Math.round(peakRss),
      errors: result.errors,
      serverCpuUs: serverCpu / result.requests * 1e6,
      databaseCpuUs: databaseCpu / result.requests * 1e6,
      generatorCpuShare: result.generatorCpuShare,
      requests: result.requests,
      pageFaultsPerRequest: pageFaults / result.requests
    }
  }

  logSample (round: number, key: string, sample: Sample): void {
    process.stderr.write(`round ${round} ${key}: ${Math.round(sample.rps)} req/s, p99 ${sample.p99} ms, ` +
      `server ${sample.serverCpuUs.toFixed(1)} µs/req, ${this.generator.name} ${Math.round(sample.generatorCpuShare * 100)} % of a core\n`)
  }

  /**
   * Creates plants 1 to `count`, each with its `preloadedTagOf` tag. A 503 is retried after its
   * Retry-After, as a client should: a service just started on a busy machine may shed load.
   */
  async preload (target: Target, count: number): Promise<void> {
    const ids = Array.from({ length: count }, (_, index) => BigInt(index + 1))
    const create = async (id: bigint, attemptsLeft: number): Promise<void> => {
      const response = await fetch(`${target.url}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
        body: `{"id":${id},"name":"plant ${id}","tag":"${preloadedTagOf(id)}"}`
      })
      if (response.status === 503 && attemptsLeft > 1) {
        await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000))
        return create(id, attemptsLeft - 1)
      }
      if (response.status !== 200) throw new Error(`${target.name}: preload answered ${response.status}: ${await response.text()}`)
    }
    for (let start = 0; start < ids.length; start += CONNECTIONS) {
      await Promise.all(ids.slice(start, start + CONNECTIONS).map((id) => create(id, PRELOAD_ATTEMPTS)))
    }
    target.preloadedIds = ids
  }

  /** A new database on the run's embedded PostgreSQL (started on first use, on the servers' CPU): its URL. */
  async postgresDatabase (): Promise<string> {
    this.#postgres ??= await startEmbeddedPostgres()
    const pid = this.#postgres.pid()
    if (this.pinning && pid !== undefined) pinProcess(pid, 0)
    const name = `bench_${Date.now()}`
    const admin = new pg.Client({ connectionString: this.#postgres.adminUrl })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${name}`)
    await admin.end()
    return this.#postgres.adminUrl.replace(/\/postgres$/, `/${name}`)
  }

  /** Takes the run's regime from the baseline rows of the backends part. */
  recordRegime (baselineRows: ReadonlyArray<{ load: string, serverCpuUs: number }>): void {
    const cpuOf = (load: Load) => baselineRows.find((row) => row.load === load)?.serverCpuUs ?? NaN
    this.#regime = { postCpuUs: cpuOf('post'), getCpuUs: cpuOf('get'), measuredBy: 'backends' }
  }

  /** The run's regime: the backends part's when it ran, else measured once by a probe of the baseline (3 rounds of 2 s). */
  async regime (): Promise<Regime> {
    if (this.#regime !== undefined) return this.#regime
    const baseline = await this.servers.startBaseline('baseline-probe')
    try {
      await this.preload(baseline, PRELOADED)
      const post: number[] = []
      const get: number[] = []
      for (let round = 0; round < this.roundsOf(PROBE_ROUNDS); round++) {
        post.push((await this.measure(baseline, 'post', this.quick ? 1 : PROBE_SECONDS)).serverCpuUs)
        get.push((await this.measure(baseline, 'get', this.quick ? 1 : PROBE_SECONDS)).serverCpuUs)
      }
      this.#regime = { postCpuUs: median(post), getCpuUs: median(get), measuredBy: 'probe' }
      return this.#regime
    } finally {
      await this.servers.stop(baseline)
    }
  }

  machine () {
    return {
      node: process.version,
      cpus: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
      pinned: this.pinning ? 'servers on CPU 0, load generator on CPU 1' : 'not pinned (no taskset)',
      date: new Date().toISOString(),
      loadGenerator: this.generator.name,
      serverNodeFlags: serverNodeFlags(ROOT).join(' '),
      connections: CONNECTIONS,
      rounds: this.rounds,
      durationSeconds: this.durationSeconds,
      ...(this.#regime === undefined ? {} : { regime: this.#regime })
    }
  }

  async cleanUp (): Promise<void> {
    this.servers.killAll()
    await this.#postgres?.destroy()
    rmSync(this.workFolder, { recursive: true, force: true })
  }

  /**
   * Waits until `target` (and, for a PostgreSQL target, the database) has finished what the last
   * measurement left in flight: until their CPU time stops growing for half a second, at most `maxMs`.
   * A measurement ends while up to 50 requests are still being answered; slow ones (a counted search,
   * about 2 s each) would otherwise be paid for by the next measurement. Resolves to the ms waited.
   */
  async settle (target: Target, maxMs = 15_000): Promise<number> {
    const pid = serverPid(target) as number
    const cpu = () => processCpuSeconds(pid) + (target.name.startsWith('postgres') ? this.#postgresCpuSeconds() : 0)
    const started = performance.now()
    let last = cpu()
    let quietSince = started
    while (performance.now() - quietSince < 500 && performance.now() - started < maxMs) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      const now = cpu()
      // A clock tick (10 ms) in 100 ms is an idle process's noise.
      if (now - last > 0.01) quietSince = performance.now()
      last = now
    }
    return Math.round(performance.now() - started)
  }

  #postgresCpuSeconds (): number {
    const pid = this.#postgres?.pid()
    return pid === undefined ? 0 : processTreeCpuSeconds(pid)
  }
}
