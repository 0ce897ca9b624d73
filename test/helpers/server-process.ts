import { spawn, type ChildProcess } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { onTestFailed, onTestFinished } from 'vitest'
import { appendCapturedLog, CAPTURED_LOG_LEVEL } from './log-capture.js'

const LOG_FLUSH_WAIT_MS = 1200
const SERVER_ENTRY = fileURLToPath(new URL('../../dist/server.js', import.meta.url))

export interface ServerProcess {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (or the signal's name) once the process has ended. */
  readonly exited: Promise<number | string>
}

/**
 * Load shedding off in every service a test starts, unless the test sets it: the event-loop signal sheds
 * whatever arrives while the process stalls for 200 ms, which a busy machine (parallel test files, other
 * work) makes happen at random, and a test would fail on a 503 it is not about (token-revocation did).
 * A test about shedding sets SHED_EVENT_LOOP_DELAY_MS and SHED_IN_FLIGHT_REQUESTS itself.
 */
export const NO_LOAD_SHEDDING: Readonly<Record<string, string>> = { SHED_EVENT_LOOP_DELAY_MS: '0', SHED_IN_FLIGHT_REQUESTS: '0' }

/**
 * Spawns the built server (dist/server.js) on a free port of 127.0.0.1 with only the given environment
 * (plus PATH; METRICS_PORT is 0 and load shedding off unless given). The process is killed by its PID
 * when the test ends, if it still runs.
 */
export function spawnServer (env: Record<string, string>, options: { cwd?: string } = {}): ServerProcess {
  const child = spawn(process.execPath, [SERVER_ENTRY], {
    cwd: options.cwd,
    // Metrics off unless a test asks: parallel test files would all want the default port 9464.
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', LOG_LEVEL: CAPTURED_LOG_LEVEL ?? 'info', ...NO_LOAD_SHEDDING, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'))
  })
  onTestFailed(async () => {
    // The service flushes its buffered log every second.
    if (child.exitCode === null && child.signalCode === null) await sleep(LOG_FLUSH_WAIT_MS)
    const complaints = warningsOf(stdout)
    if (complaints !== '') console.error(`server ${child.pid ?? '?'} logged, before the test failed:\n${complaints}`)
  })
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid as number, 'SIGKILL')
      await exited
    }
    appendCapturedLog(stdout)
  })
  return { child, stdout: () => stdout, stderr: () => stderr, exited }
}

/** The log lines at warn level or above (pino's 40+), which say why a request was answered 5xx. */
function warningsOf (log: string): string {
  return log.split('\n').filter((line) => {
    const level = /^\{"level":(\d+)/.exec(line)?.[1]
    return level !== undefined && Number(level) >= 40
  }).join('\n')
}

/** Spawns the built server and resolves once it listens, with its base URL. */
export async function startServer (env: Record<string, string>, options: { cwd?: string } = {}): Promise<ServerProcess & { baseUrl: string }> {
  const server = spawnServer(env, options)
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen within 15 s:\n${server.stdout()}\n${server.stderr()}`)), 15_000)
    server.child.stdout?.on('data', () => {
      const address = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(server.stdout())?.[1]
      if (address !== undefined) {
        clearTimeout(timer)
        resolve(address)
      }
    })
    server.exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code} before listening:\n${server.stdout()}\n${server.stderr()}`))
    })
  })
  return { ...server, baseUrl }
}
