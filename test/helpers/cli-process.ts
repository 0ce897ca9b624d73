import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { appendCapturedLog } from './log-capture.js'

/** `node bin/plantstore.js`: the command as operators run it (dist/ is built by the global set-up). */
export const CLI = fileURLToPath(new URL('../../bin/plantstore.js', import.meta.url))

export interface CliRun { readonly code: number | null, readonly signal: NodeJS.Signals | null, readonly stdout: string, readonly stderr: string }

export interface CliOptions {
  readonly cwd: string
  /** The whole environment besides PATH: nothing of the test runner's leaks in. */
  readonly env: Record<string, string>
  /** Written to the command's stdin, which is then closed; stdin is empty otherwise. */
  readonly stdin?: string | Buffer
  /** Called once the process has started, with it (to signal it mid-run). */
  readonly started?: (child: ChildProcess) => void
}

/** Runs `plantstore …` to its end and resolves with its exit code and output. */
export function runCli (args: readonly string[], options: CliOptions): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: options.cwd, env: { PATH: process.env.PATH ?? '', ...options.env }, stdio: ['pipe', 'pipe', 'pipe']
    })
    const stdout: Buffer[] = []
    const stderr: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk))
    child.once('error', reject)
    child.once('close', (code, signal) => {
      const run = { code, signal, stdout: Buffer.concat(stdout).toString(), stderr: Buffer.concat(stderr).toString() }
      appendCapturedLog(run.stderr)
      resolve(run)
    })
    child.stdin.on('error', () => {})
    child.stdin.end(options.stdin ?? '')
    options.started?.(child)
  })
}
