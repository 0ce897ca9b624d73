import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { IDLE, readProfiles, selfTimeIn, type SelfTime } from '../cpu-profile.js'
import type { Sample } from '../figures.js'
import type { Harness } from '../harness.js'
import { ROOT, type Target } from '../processes.js'
import { formatTable } from '../report.js'
import { fixed } from './changes-helpers.js'
import { differenceTable, measureWindow, scaledByInterval, type Profiled, type ProfileWindow } from './profiles.js'

/**
 * Where the time goes, for the changes part: services under `node --cpu-prof`, one measurement of each
 * load after a warm-up (as --only profiles does it); the samples stamped inside a measurement are that
 * load's, scaled to the main thread's CPU per request from /proc, and worker threads' (the SQLite writer)
 * by their sampling interval. Compared in pairs: this build's POST against the release's, a feed page
 * against a list page.
 */

/** The `limit` functions with the most self time, scaled so that the busy samples make `cpuUs`. */
export function topFunctions (time: SelfTime, cpuUs: number, limit = Infinity): Record<string, number> {
  const busy = time.samples - (time.byPlace.get(IDLE) ?? 0)
  return Object.fromEntries([...time.byFunction.entries()].filter(([key]) => key !== IDLE)
    .sort(([, a], [, b]) => b - a).slice(0, limit).map(([key, samples]) => [key, fixed(samples / busy * cpuUs, 3)]))
}

/** A profiled load of the changes part: any load's name. */
export type ProfiledLoad = Profiled<string>

/** A load of a profiled service: its name and one measurement of it, of `seconds`. */
export interface ProfileLoad {
  readonly load: string
  readonly measure: (target: Target, seconds: number) => Promise<Sample>
}

/** One service under the profiler (`start` given the profiler's flags), each load once to warm up, then each measured. */
export async function profileService (harness: Harness, name: string, start: (flags: string[]) => Promise<Target>, loads: readonly ProfileLoad[]): Promise<ProfiledLoad[]> {
  const folder = join(harness.workFolder, 'changes-profiles', name)
  mkdirSync(folder, { recursive: true })
  const target = await start(['--cpu-prof', `--cpu-prof-dir=${folder}`])
  const windows: Array<ProfileWindow & { load: string }> = []
  try {
    for (const load of loads) {
      await load.measure(target, 1)
      await harness.settle(target, 5000)
    }
    for (const load of loads) {
      const measured = await measureWindow(target, () => load.measure(target, harness.durationSeconds))
      await harness.settle(target, 5000)
      windows.push({ load: load.load, ...measured })
    }
  } finally {
    await harness.servers.stop(target)
  }
  const { main, workers } = readProfiles(folder)
  if (main === undefined) throw new Error(`${name} wrote no CPU profile`)
  return windows.map((measured) => {
    const time = selfTimeIn(main, measured.window, ROOT)
    const busy = time.samples - (time.byPlace.get(IDLE) ?? 0)
    const byPlace: Record<string, number> = {}
    for (const [key, samples] of time.byPlace) if (key !== IDLE) byPlace[key] = fixed(samples / busy * measured.mainCpuUs, 2)
    return {
      target: name,
      load: measured.load,
      requests: measured.requests,
      mainCpuUs: fixed(measured.mainCpuUs, 2),
      otherThreadsCpuUs: fixed(measured.otherThreadsCpuUs, 2),
      databaseCpuUs: fixed(measured.databaseCpuUs, 2),
      byFunction: topFunctions(time, measured.mainCpuUs),
      byPlace,
      workerByFunction: scaledByInterval(workers.map((profile) => selfTimeIn(profile, measured.window, ROOT)), measured)
    }
  })
}

/** Prints `service` against `reference`: their CPU, then the largest differences by place and by function, the workers' too. */
export function printProfilePair (title: string, service: ProfiledLoad, reference: ProfiledLoad): void {
  process.stdout.write(`\n${title}: main thread ${service.mainCpuUs} µs/req against ${reference.mainCpuUs}; other threads ${service.otherThreadsCpuUs} ` +
    `against ${reference.otherThreadsCpuUs}${service.databaseCpuUs > 0 ? `; PostgreSQL ${service.databaseCpuUs} against ${reference.databaseCpuUs}` : ''}\n`)
  process.stdout.write(`${differenceTable('place', service.byPlace, reference.byPlace, 10)}\n`)
  process.stdout.write(`${differenceTable('function', service.byFunction, reference.byFunction, 15)}\n`)
  if (Object.keys(service.workerByFunction).length > 0 || Object.keys(reference.workerByFunction).length > 0) {
    process.stdout.write(`${differenceTable('worker thread function', service.workerByFunction, reference.workerByFunction, 10)}\n`)
  }
}

/** The largest entries of a profile as a table. */
export function printTop (title: string, entries: Record<string, number>, unit: string, limit = 15): void {
  process.stdout.write(`\n${title}\n${formatTable(['function', unit], Object.entries(entries).sort(([, a], [, b]) => b - a).slice(0, limit)
    .map(([key, value]) => [key, value.toFixed(3)]), 1)}\n`)
}

/** The pairs' entries kept in the results: the largest 40 functions each. */
export function trimmed (profile: ProfiledLoad): ProfiledLoad {
  const top = (entries: Record<string, number>) => Object.fromEntries(Object.entries(entries).sort(([, a], [, b]) => b - a).slice(0, 40))
  return { ...profile, byFunction: top(profile.byFunction), workerByFunction: top(profile.workerByFunction) }
}
