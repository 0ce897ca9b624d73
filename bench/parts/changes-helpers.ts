import { fork, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Harness } from '../harness.js'
import { pinProcess, processCpuSeconds, ROOT } from '../processes.js'
import type { WriterOrder, WriterReport } from '../changes-writer.js'

/** What the changes part's files share: its helper processes, and percentiles. */

/** A helper script of the bench (TypeScript, through tsx) as a child with a message channel, on the load generator's core. */
export function forkHelper (harness: Harness, script: string): ChildProcess {
  const child = fork(join(ROOT, 'bench', script), [], { cwd: ROOT, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  if (harness.pinning && child.pid !== undefined) pinProcess(child.pid, 1)
  return child
}

/** Sends `message` and resolves with the child's first answer of `type` (rejects if it exits first). */
export function ask<Answer> (child: ChildProcess, message: object, type: string, timeoutMs = 120_000): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { finish(new Error(`no ${type} answer within ${timeoutMs / 1000} s`)) }, timeoutMs)
    const onMessage = (answer: { type?: string }) => { if (answer.type === type || type === '*') finish(undefined, answer as Answer) }
    const onExit = (code: number | null) => { finish(new Error(`the helper exited (${code}) before its ${type} answer`)) }
    const finish = (error: Error | undefined, answer?: Answer) => {
      clearTimeout(timer)
      child.off('message', onMessage)
      child.off('exit', onExit)
      if (error === undefined) resolve(answer as Answer)
      else reject(error)
    }
    child.on('message', onMessage)
    child.once('exit', onExit)
    child.send(message)
  })
}

/** A writer process (bench/changes-writer.ts) for one run; `started` resolves with it, `done` with its report. */
export function startWriter (harness: Harness, order: WriterOrder): { child: ChildProcess, done: Promise<WriterReport & { processCpuSeconds: number }> } {
  const child = forkHelper(harness, 'changes-writer.ts')
  const pid = child.pid as number
  const done = new Promise<WriterReport & { processCpuSeconds: number }>((resolve, reject) => {
    let cpu = 0
    const sampler = setInterval(() => { try { cpu = processCpuSeconds(pid) } catch {} }, 200)
    child.once('message', (report: WriterReport) => {
      clearInterval(sampler)
      try { cpu = processCpuSeconds(pid) } catch {}
      resolve({ ...report, processCpuSeconds: cpu })
    })
    child.once('exit', (code) => {
      clearInterval(sampler)
      if (code !== 0) reject(new Error(`the changes writer exited with ${code}`))
    })
  })
  child.send(order)
  return { child, done }
}

/** The value below which `share` of `values` lie. */
export function percentile (values: readonly number[], share: number): number {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)] as number
}

/** The same of a histogram of [step, count] pairs with `stepsPerUnit` steps a unit. */
export function histogramPercentile (steps: ReadonlyArray<readonly [number, number]>, share: number, stepsPerUnit: number): number {
  const total = steps.reduce((sum, [, count]) => sum + count, 0)
  if (total === 0) return NaN
  const wanted = Math.ceil(share * total)
  let seen = 0
  for (const [step, count] of [...steps].sort((a, b) => a[0] - b[0])) {
    seen += count
    if (seen >= wanted) return step / stepsPerUnit
  }
  return NaN
}

/** Adds histograms of [step, count] pairs. */
export function mergeHistograms (histograms: ReadonlyArray<ReadonlyArray<readonly [number, number]>>): Array<[number, number]> {
  const merged = new Map<number, number>()
  for (const histogram of histograms) for (const [step, count] of histogram) merged.set(step, (merged.get(step) ?? 0) + count)
  return [...merged.entries()].sort((a, b) => a[0] - b[0])
}

/** The package.json version of the build in `root`. */
export const versionOf = (root: string) => (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const fixed = (value: number, decimals = 1) => Number(value.toFixed(decimals))

/**
 * A thread's time on a CPU and waiting for one (run-queue delay), in seconds, from /proc/<pid>/task/<tid>/schedstat
 * (the main thread when `tid` is the pid): on a shared machine, the second says how long the thread was ready
 * to run while others held the CPUs.
 */
export function scheduledSeconds (pid: number, tid = pid): { running: number, waiting: number } {
  try {
    const [running, waiting] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number)
    return { running: (running ?? NaN) / 1e9, waiting: (waiting ?? NaN) / 1e9 }
  } catch {
    return { running: NaN, waiting: NaN }
  }
}
