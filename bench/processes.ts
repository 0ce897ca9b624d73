import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from '../scripts/embedded-postgres.js'

/**
 * The processes the bench measures: starting and stopping them, the Node.js flags they run with, and
 * what /proc says of them (CPU time, memory, page faults).
 */

/** The project's root: the servers' working directory, whose dist/server.js they run. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url))
/** The bearer token every server accepts unless its environment says otherwise. */
export const TOKEN = 'bench-token'

export interface Target {
  readonly name: string
  readonly url: string
  readonly process: ChildProcess
  /** The bearer token the load generator sends. */
  token: string
  nextId: bigint
  preloadedIds: bigint[]
  /** A service's metrics listener, when it has one. */
  readonly metricsUrl?: string
}

/** The server's own PID: under taskset the child is taskset, which execs the server in place. */
export const serverPid = (target: Target) => target.process.pid

/** Binds every thread of a running process to one CPU. */
export function pinProcess (pid: number, cpu: 0 | 1): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' })
}

/** The Node.js flags `npm start` (and the image) of the build in `root` run the service with: the shipped memory settings. */
export const serviceNodeFlags = (root: string) => (/node ((?:--\S+ )*)dist\/server\.js/.exec(
  (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start)?.[1] ?? '')
  .split(' ').filter((flag) => flag !== '')

/**
 * Added to the baseline's Node.js flags: the shipped largest semi-space (8 MB) as the least too. The
 * rounds leave each server idle while the others are measured, 10 to 30 s; V8 shrinks the young
 * generation of an idle heap, and on 2026-11-23 some servers never grew it back (a third more CPU a
 * request for the whole run, 0.6 page faults a request instead of 0.05; bench/results/2026-11-23-2142-issue-14-observability.md).
 * The service gets none of it: it runs with exactly the flags it ships with, because the least size
 * applies to every isolate of the process, and gave the SQLite writer thread a 16 MB young generation
 * it does not use when shipped (8-10 MB more peak RSS than what ships; issue 26). The page faults per
 * request the bench records show that state if a service falls into it.
 */
export const benchNodeFlags = (shippedFlags: readonly string[]) => {
  const semiSpaceMb = shippedFlags.map((flag) => /^--max-semi-space-size=(\d+)$/.exec(flag)?.[1]).find((size) => size !== undefined) ?? '8'
  return [`--min-semi-space-size=${semiSpaceMb}`]
}

/** The Node.js flags a service of the build in `root` runs with here: the shipped ones, as `npm start` and the image run it. */
export const serverNodeFlags = (root: string) => serviceNodeFlags(root)

/**
 * The processes of one run, each with its standard output in a file of the run's work folder; when
 * pinning, servers run on CPU 0 and the load generator's helpers (receiver, sink) on CPU 1.
 */
export class ServerProcesses {
  readonly #workFolder: string
  readonly #pinning: boolean
  readonly #started: ChildProcess[] = []

  constructor (workFolder: string, pinning: boolean) {
    this.#workFolder = workFolder
    this.#pinning = pinning
  }

  /**
   * Starts a server with its standard output in a file, as a container runtime would take it off the
   * server's hands: the log lines cost the server their writes, but reading them does not cost the load
   * generator's core.
   */
  start (name: string, command: string[], env: Record<string, string>, cpu: 0 | 1 = 0, cwd = ROOT, startTimeoutMs = 30_000): Promise<Target> {
    const [program, ...rest] = this.#pinning ? ['taskset', '-c', String(cpu), ...command] : command
    const logFile = this.#logFile(name)
    const logFd = openSync(logFile, 'w')
    const child = spawn(program as string, rest, {
      cwd,
      env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', PLANTSTORE_TOKENS: TOKEN, BENCH_TOKEN: TOKEN, ...env },
      stdio: ['ignore', logFd, 'inherit']
    })
    closeSync(logFd)
    this.#started.push(child)
    return new Promise((resolve, reject) => {
      const startedAt = Date.now()
      const poll = setInterval(() => {
        const output = readFileSync(logFile, 'utf8')
        const url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1]
        if (url !== undefined) {
          clearInterval(poll)
          resolve({ name, url, process: child, token: TOKEN, nextId: 1_000_000_000_000n, preloadedIds: [] })
        } else if (child.exitCode !== null || Date.now() - startedAt > startTimeoutMs) {
          clearInterval(poll)
          reject(new Error(`${name} did not start (exit code ${child.exitCode}):\n${output.slice(-5000)}`))
        }
      }, 50)
    })
  }

  /**
   * Starts `dist/server.js` of the build in `root` (this one unless told), its working directory there so
   * that build's node_modules are used. Every service gets a free METRICS_PORT of its own (metrics on,
   * the shipped default) unless `env` sets one: the default 9464 would let only one service start.
   * `extraNodeFlags` come after the shipped ones (a profiler's, say). `startTimeoutMs`: how long it may take
   * to listen (a start that migrates a large store takes longer than the 30 s default).
   */
  async startService (name: string, databaseUrl: string, env: Record<string, string> = {}, root = ROOT, extraNodeFlags: readonly string[] = [],
    startTimeoutMs = 30_000): Promise<Target> {
    const metricsPort = env.METRICS_PORT ?? String(await freePort())
    const target = await this.start(name, [process.execPath, ...serverNodeFlags(root), ...extraNodeFlags, 'dist/server.js'],
      { DATABASE_URL: databaseUrl, METRICS_PORT: metricsPort, ...env }, 0, root, startTimeoutMs)
    return metricsPort === '0' ? target : { ...target, metricsUrl: `http://127.0.0.1:${metricsPort}` }
  }

  /**
   * The bare-Fastify baseline (bench/baseline.ts), with the bench's young generation (`benchNodeFlags`).
   * `logged`: with Fastify's default request logging (two pino lines a request, written synchronously
   * to standard output), what a user of bare Fastify would otherwise run. `plants`: it starts holding the
   * plants 1 to `plants` of bench/plant-catalog.ts (the query part's).
   */
  startBaseline (name: string, options: { readonly logged?: boolean, readonly extraNodeFlags?: readonly string[], readonly plants?: number } = {}): Promise<Target> {
    return this.start(name, [process.execPath, ...benchNodeFlags(serviceNodeFlags(ROOT)), ...(options.extraNodeFlags ?? []), '--import', 'tsx', 'bench/baseline.ts'],
      { ...(options.logged === true ? { BENCH_LOGGED: '1' } : {}), ...(options.plants === undefined ? {} : { BENCH_PLANTS: String(options.plants) }) },
      0, ROOT, 120_000)
  }

  /** A graceful stop (SIGTERM), made a kill after 10 s. */
  async stop (target: Target): Promise<void> {
    if (target.process.exitCode !== null || target.process.signalCode !== null) return
    const exited = new Promise((resolve) => target.process.once('exit', resolve))
    process.kill(target.process.pid as number, 'SIGTERM')
    const timer = setTimeout(() => { if (target.process.exitCode === null) process.kill(target.process.pid as number, 'SIGKILL') }, 10_000)
    await exited
    clearTimeout(timer)
  }

  /** What a target has written to its standard output so far. */
  log (target: Target): string {
    return readFileSync(this.#logFile(target.name), 'utf8')
  }

  /** Kills whatever is still running: the end of a run, finished or not. */
  killAll (): void {
    for (const child of this.#started) {
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) process.kill(child.pid, 'SIGKILL')
    }
  }

  #logFile (name: string): string {
    return join(this.#workFolder, `${name}.log`)
  }
}

const CLOCK_TICKS_PER_SECOND = 100

/** A process's /proc stat fields after "pid (comm) ": state at index 0, ppid 1, minflt 7, utime 11, stime 12, cutime 13, cstime 14. */
const statFields = (pid: number | 'self') => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []

/** CPU seconds a process (all its threads) has used, from /proc. */
export function processCpuSeconds (pid: number): number {
  const fields = statFields(pid)
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND
}

/**
 * CPU seconds of a process tree (PostgreSQL's postmaster and its backends, say): every live process's
 * own time plus the time of the children it has reaped, so backends that end mid-measurement still count.
 */
export function processTreeCpuSeconds (rootPid: number): number {
  const stats = new Map<number, string[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      stats.set(Number(entry), statFields(Number(entry)))
    } catch {}
  }
  const inTree = (pid: number): boolean => {
    if (pid === rootPid) return true
    const parent = Number(stats.get(pid)?.[1])
    return parent > 1 && inTree(parent)
  }
  let ticks = 0
  for (const [pid, fields] of stats) {
    if (inTree(pid)) ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])
  }
  return ticks / CLOCK_TICKS_PER_SECOND
}

/** CPU seconds of this process's children that have ended (the kernel adds them when they are reaped). */
export function endedChildrenCpuSeconds (): number {
  const fields = statFields('self')
  return (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS_PER_SECOND
}

/** A process's minor page faults so far (field 10 of its stat). */
export function minorPageFaults (pid: number): number {
  return Number(statFields(pid)[7])
}

/** A process's resident memory, in MB. */
export function rssMb (pid: number | undefined): number {
  if (pid === undefined) return 0
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match === null ? 0 : Number(match[1]) / 1024
}

/** CPU seconds of a process's main thread (the thread whose id is the PID) and of all its threads. */
export function mainThreadCpuSeconds (pid: number): { main: number, all: number } {
  const fields = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
  return { main: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND, all: processCpuSeconds(pid) }
}
