import { spawn } from 'node:child_process'
import { accessSync, constants, readdirSync, readFileSync, rmSync, statfsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { TestProject } from 'vitest/node'
import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** A PostgreSQL superuser URL; each test makes its own database on that server. */
    postgresAdminUrl: string
    /** Whether that server is the run's own, removed with everything on it when the run ends. */
    postgresServerIsTemporary: boolean
  }
}

/**
 * Once per run: build the server the process tests start, and provide a real PostgreSQL, either the
 * one PLANTSTORE_TEST_DATABASE_URL names or an embedded one started here and removed afterwards.
 * If neither can be had the run fails here, saying why; no PostgreSQL test is skipped.
 * The two are made at once: the build (incremental, as `npm run build`: tsconfig.build.json keeps its
 * record in dist/) takes 3 s on unchanged sources and 10 s from nothing, PostgreSQL 1.6 s.
 */
export default async function setup (project: TestProject): Promise<() => Promise<void>> {
  const built = build()
  const external = process.env.PLANTSTORE_TEST_DATABASE_URL
  if (external !== undefined && external !== '') {
    await built
    project.provide('postgresAdminUrl', external)
    project.provide('postgresServerIsTemporary', false)
    return async () => {}
  }
  const [compiled, started] = await Promise.allSettled([built, startEmbeddedPostgres(inMemoryIfRoom())])
  if (compiled.status === 'rejected') {
    if (started.status === 'fulfilled') await started.value.discard()
    throw compiled.reason
  }
  if (started.status === 'rejected') {
    throw new Error('could not start the embedded PostgreSQL for the tests (set PLANTSTORE_TEST_DATABASE_URL ' +
      `to use an external server): ${String(started.reason)}`)
  }
  const postgres = started.value
  project.provide('postgresAdminUrl', postgres.adminUrl)
  project.provide('postgresServerIsTemporary', true)
  // The run's own server: nothing it holds is read again, so no checkpoint at the end (see discard).
  return () => postgres.discard()
}

/** `tsc -b tsconfig.build.json`, as `npm run build`, its messages on this process's output. */
function build (): Promise<void> {
  const args = ['node_modules/typescript/bin/tsc', '-b', 'tsconfig.build.json']
  return new Promise((resolve, reject) => {
    const tsc = spawn(process.execPath, args, { stdio: 'inherit' })
    tsc.once('error', reject)
    tsc.once('exit', (code, signal) => {
      if (code === 0) resolve()
      else reject(new Error(`the build of dist/ failed (tsc ${code ?? signal}); its messages are above`))
    })
  })
}

const IN_MEMORY = '/dev/shm'
/** Room the run's databases take, with a margin: a run makes a few hundred, of 7.5 MB each. */
const ROOM_NEEDED = 6 * 2 ** 30

/**
 * Where the run's PostgreSQL keeps its data: in memory (/dev/shm, a tmpfs) when there is room, else in
 * the system's temporary folder. On disk, the run's hundreds of CREATE DATABASE, each a copy of the
 * template synced to disk, took 75 to 175 ms each on this 2-core machine, and competed with the SQLite
 * tests' own syncs; in memory they take 20 ms. Nothing here tests PostgreSQL surviving a power cut.
 */
function inMemoryIfRoom (): { parent?: string } {
  try {
    accessSync(IN_MEMORY, constants.W_OK)
    removeAbandonedServers()
    const { bavail, bsize } = statfsSync(IN_MEMORY)
    return bavail * bsize >= ROOM_NEEDED ? { parent: IN_MEMORY } : {}
  } catch {
    return {}
  }
}

/**
 * Removes the data of the runs' servers that were cut short (a run killed before its teardown), which
 * would otherwise hold their memory until the machine restarts: a folder whose postmaster.pid names no
 * live process, or without that file an hour after it was made. A running server, another run's
 * included, is left alone.
 */
function removeAbandonedServers (): void {
  for (const name of readdirSync(IN_MEMORY)) {
    if (!name.startsWith('plantstore-pg-')) continue
    const folder = join(IN_MEMORY, name)
    try {
      if (serverRuns(folder)) continue
      rmSync(folder, { recursive: true, force: true })
    } catch {
      // Another run may be removing it, or starting it: left for a later sweep.
    }
  }
}

function serverRuns (folder: string): boolean {
  let pid: number
  try {
    pid = Number(readFileSync(join(folder, 'data', 'postmaster.pid'), 'utf8').split('\n')[0])
  } catch {
    return Date.now() - statSync(folder).mtimeMs < 3600_000
  }
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
