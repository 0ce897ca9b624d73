import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { onTestFinished } from 'vitest'
import { sqliteDriverPath } from '../../src/store/sqlite/driver.js'

/**
 * Another process takes the database's write lock and keeps it for `milliseconds`; resolves once it holds
 * the lock, with a promise of its exit (the lock released). The test's end kills it if it still runs.
 */
export async function holdWriteLock (file: string, milliseconds: number): Promise<{ released: Promise<void> }> {
  const holder = spawn(process.execPath, [join(import.meta.dirname, 'hold-write-lock.cjs'), sqliteDriverPath, file, String(milliseconds)],
    { stdio: ['ignore', 'pipe', 'inherit'] })
  onTestFinished(() => { if (holder.exitCode === null && holder.signalCode === null) process.kill(holder.pid as number, 'SIGKILL') })
  const released = new Promise<void>((resolve) => holder.once('exit', () => { resolve() }))
  await new Promise((resolve, reject) => {
    holder.stdout.once('data', resolve)
    holder.once('exit', (code) => { reject(new Error(`the lock holder exited (${code}) before it held the lock`)) })
  })
  return { released }
}
