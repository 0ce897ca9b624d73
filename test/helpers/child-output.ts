import type { ChildProcessByStdio } from 'node:child_process'
import type { Readable, Writable } from 'node:stream'

export interface ChildOutput { readonly code: number | null, readonly stdout: string, readonly stderr: string }

/** Collects a spawned process's stdout and stderr and resolves with them and its exit code once it has closed. */
export function outputOf (child: ChildProcessByStdio<Writable | null, Readable, Readable>): Promise<ChildOutput> {
  return new Promise((resolve, reject) => {
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}
