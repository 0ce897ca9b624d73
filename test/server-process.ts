import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { onTestFinished } from 'vitest'

const SERVER_ENTRY = fileURLToPath(new URL('../dist/server.js', import.meta.url))

export interface ServerProcess {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (or the signal's name) once the process has ended. */
  readonly exited: Promise<number | string>
}

/**
 * Starts the built server (dist/server.js) as a child process on a free port of 127.0.0.1 and resolves
 * once it listens. The process is killed by its PID when the test ends, if it still runs.
 */
export async function startServer (env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, [SERVER_ENTRY], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'))
  })
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid as number, 'SIGKILL')
      await exited
    }
  })

  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen within 15 s:\n${stdout}\n${stderr}`)), 15_000)
    const onData = () => {
      const address = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1]
      if (address !== undefined) {
        clearTimeout(timer)
        resolve(address)
      }
    }
    child.stdout?.on('data', onData)
    exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code} before listening:\n${stdout}\n${stderr}`))
    })
  })
  return { child, baseUrl, stdout: () => stdout, stderr: () => stderr, exited }
}

/** Runs the built server to completion (for start-up failures) and returns what it printed. */
export async function runServerToExit (env: Record<string, string>): Promise<{ code: number | string, stdout: string, stderr: string }> {
  const child = spawn(process.execPath, [SERVER_ENTRY], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid as number, 'SIGKILL')
  })
  const code = await new Promise<number | string>((resolve) => {
    child.once('exit', (exitCode, signal) => resolve(exitCode ?? signal ?? 'unknown'))
  })
  return { code, stdout, stderr }
}
