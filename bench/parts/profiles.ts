import { mkdirSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { IDLE, monotonicMicros, readProfiles, selfTimeIn, type SelfTime, type Window } from '../cpu-profile.js'
import type { Row, Sample } from '../figures.js'
import { LOADS, PRELOADED, type Harness, type Part } from '../harness.js'
import type { Load } from '../load-generator.js'
import { ROOT, mainThreadCpuSeconds, serverPid, type Target } from '../processes.js'
import { asJson, formatTable, writeResultsFile } from '../report.js'

const BASELINE = 'baseline'
const PROFILED_SERVICES = ['sqlite', 'postgres', 'memory'] as const
/** Functions listed per load and service: the largest differences to the baseline. */
const LISTED_FUNCTIONS = 25
const WARM_UP_SECONDS = 1

/** One measurement of a profiled service: its window of the profile, and its CPU per request from /proc. */
export interface ProfileWindow {
  readonly window: Window
  readonly requests: number
  readonly mainCpuUs: number
  readonly otherThreadsCpuUs: number
  readonly databaseCpuUs: number
}

/** A load's profile, µs a request: what --only profiles and --only query record of each load they profile. */
export interface Profiled<ProfiledLoad extends string = Load> {
  readonly target: string
  readonly load: ProfiledLoad
  readonly requests: number
  /** The main thread's CPU time ÷ requests (from /proc), which its profile's busy samples are scaled to. */
  readonly mainCpuUs: number
  /** Every other thread's (the SQLite writer and search threads, libuv's pool, V8's helpers) ÷ requests. */
  readonly otherThreadsCpuUs: number
  readonly databaseCpuUs: number
  /** µs a request by function, main thread; then the workers' (the SQLite writer and searcher), scaled by their sampling interval. */
  readonly byFunction: Record<string, number>
  readonly byPlace: Record<string, number>
  readonly workerByFunction: Record<string, number>
}

/**
 * Where the time of a request goes, against the baseline. Each profiled server (the baseline, and the
 * service on SQLite, PostgreSQL and memory) runs once under `node --cpu-prof`, is preloaded, and takes
 * each load for one measurement of the run's length after a warm-up; the profile's samples stamped
 * inside a measurement are that load's. A function's µs per request is its share of the main thread's
 * busy samples times the main thread's CPU time (from /proc) ÷ requests; worker threads' profiles are
 * scaled by their sampling interval. Figures go to bench/results/profiles.json, and the tables of
 * differences (by place, then the largest by function) to standard output.
 */
export async function compareProfiles (harness: Harness): Promise<Row[]> {
  const { servers } = harness
  const results: Profiled[] = []
  for (const name of [BASELINE, ...PROFILED_SERVICES]) {
    const folder = join(harness.workFolder, 'profiles', name)
    mkdirSync(folder, { recursive: true })
    const profilerFlags = ['--cpu-prof', `--cpu-prof-dir=${folder}`]
    const target = name === BASELINE
      ? await servers.startBaseline(name, { extraNodeFlags: profilerFlags })
      : await servers.startService(name, name === 'sqlite' ? `sqlite:${join(harness.workFolder, 'profiled.db')}` : name === 'postgres' ? await harness.postgresDatabase() : 'memory:', {}, ROOT, profilerFlags)
    await harness.preload(target, PRELOADED)
    const measured = new Map<Load, ProfileWindow>()
    for (const load of LOADS) {
      await harness.measure(target, load, WARM_UP_SECONDS)
      measured.set(load, await measureWindow(target, () => harness.measure(target, load, harness.durationSeconds)))
    }
    await servers.stop(target)
    const { main, workers } = readProfiles(folder)
    if (main === undefined) throw new Error(`${name} wrote no CPU profile to ${folder}`)
    for (const [load, measurement] of measured) {
      const mainTime = selfTimeIn(main, measurement.window, ROOT)
      const workerTimes = workers.map((profile) => selfTimeIn(profile, measurement.window, ROOT))
      results.push({
        target: name,
        load,
        requests: measurement.requests,
        mainCpuUs: round(measurement.mainCpuUs),
        otherThreadsCpuUs: round(measurement.otherThreadsCpuUs),
        databaseCpuUs: round(measurement.databaseCpuUs),
        byFunction: scaledToCpu(mainTime, 'byFunction', measurement.mainCpuUs),
        byPlace: scaledToCpu(mainTime, 'byPlace', measurement.mainCpuUs),
        workerByFunction: scaledByInterval(workerTimes, measurement)
      })
    }
  }
  for (const load of LOADS) printDifferences(results, load)
  const written = writeResultsFile(harness.quick ? 'profiles-quick.json' : 'profiles.json',
    asJson({ machine: { ...harness.machine(), loadAverages: loadavg().map((load) => Number(load.toFixed(2))) }, profiles: results }))
  process.stdout.write(`\nwritten to ${written}\n`)
  return []
}

/** Runs `measure` on a service under the profiler, and what its window of the profile holds is that measurement's. */
export async function measureWindow (target: Target, measure: () => Promise<Sample>): Promise<ProfileWindow> {
  const pid = serverPid(target) as number
  const before = mainThreadCpuSeconds(pid)
  const from = monotonicMicros()
  const sample = await measure()
  const to = monotonicMicros()
  const after = mainThreadCpuSeconds(pid)
  const perRequest = (seconds: number) => seconds / sample.requests * 1e6
  return {
    window: { from, to },
    requests: sample.requests,
    mainCpuUs: perRequest(after.main - before.main),
    otherThreadsCpuUs: perRequest(after.all - after.main - (before.all - before.main)),
    databaseCpuUs: sample.databaseCpuUs
  }
}

const round = (value: number) => Number(value.toFixed(2))

function scaledToCpu (time: SelfTime, by: 'byFunction' | 'byPlace', cpuUs: number): Record<string, number> {
  const idle = time.byPlace.get(IDLE) ?? 0
  const busy = time.samples - idle
  const scaled: Record<string, number> = {}
  for (const [key, samples] of time[by]) if (key !== IDLE) scaled[key] = round(samples / busy * cpuUs)
  return scaled
}

/** Worker threads' µs a request by function: their samples in the measurement's window, each worth the window's length ÷ its samples. */
export function scaledByInterval (times: SelfTime[], measurement: { readonly window: Window, readonly requests: number }): Record<string, number> {
  const scaled: Record<string, number> = {}
  for (const time of times) {
    if (time.samples === 0) continue
    const sampleUs = (measurement.window.to - measurement.window.from) / time.samples
    for (const [key, samples] of time.byFunction) {
      if (key !== IDLE && !key.startsWith('(program)')) scaled[key] = round((scaled[key] ?? 0) + samples * sampleUs / measurement.requests)
    }
  }
  return scaled
}

function printDifferences (results: Profiled[], load: Load): void {
  const baseline = results.find((result) => result.target === BASELINE && result.load === load)
  if (baseline === undefined) return
  for (const service of results.filter((result) => result.target !== BASELINE && result.load === load)) {
    process.stdout.write(`\n${service.target} ${load}: main thread ${service.mainCpuUs} µs/req against ${baseline.mainCpuUs} ` +
      `(other threads ${service.otherThreadsCpuUs} against ${baseline.otherThreadsCpuUs}` +
      `${service.databaseCpuUs > 0 ? `; PostgreSQL ${service.databaseCpuUs}` : ''})\n`)
    process.stdout.write(`${differenceTable('place', service.byPlace, baseline.byPlace, Infinity)}\n`)
    process.stdout.write(`${differenceTable('function', service.byFunction, baseline.byFunction, LISTED_FUNCTIONS)}\n`)
    const worker = Object.entries(service.workerByFunction).sort(([, a], [, b]) => b - a).slice(0, 10)
    if (worker.length > 0) process.stdout.write(`${formatTable(['worker thread function', 'µs/req'], worker.map(([key, us]) => [key, us.toFixed(2)]), 1)}\n`)
  }
}

/** The largest differences of a service's µs per request to the baseline's, by `what` (place or function), as a table. */
export function differenceTable (what: string, service: Record<string, number>, baseline: Record<string, number>, limit: number): string {
  const keys = [...new Set([...Object.keys(service), ...Object.keys(baseline)])]
    .map((key) => ({ key, service: service[key] ?? 0, baseline: baseline[key] ?? 0 }))
    .sort((a, b) => Math.abs(b.service - b.baseline) - Math.abs(a.service - a.baseline))
    .filter((entry) => Math.abs(entry.service - entry.baseline) >= 0.05)
    .slice(0, limit)
  return formatTable([what, 'service µs/req', 'baseline µs/req', 'difference'],
    keys.map((entry) => [entry.key, entry.service.toFixed(2), entry.baseline.toFixed(2), (entry.service - entry.baseline).toFixed(2)]), 1)
}

export const profilesPart: Part = {
  name: 'profiles',
  owns: () => false,
  compare: compareProfiles
}
