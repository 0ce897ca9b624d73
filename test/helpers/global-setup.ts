import { spawn } from 'node:child_process'
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
  const [compiled, started] = await Promise.allSettled([built, startEmbeddedPostgres()])
  if (compiled.status === 'rejected') {
    if (started.status === 'fulfilled') await started.value.destroy()
    throw compiled.reason
  }
  if (started.status === 'rejected') {
    throw new Error('could not start the embedded PostgreSQL for the tests (set PLANTSTORE_TEST_DATABASE_URL ' +
      `to use an external server): ${String(started.reason)}`)
  }
  const postgres = started.value
  project.provide('postgresAdminUrl', postgres.adminUrl)
  project.provide('postgresServerIsTemporary', true)
  return () => postgres.destroy()
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
