import { execFileSync } from 'node:child_process'
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
 */
export default async function setup (project: TestProject): Promise<() => Promise<void>> {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-b', 'tsconfig.build.json'], { stdio: 'inherit' })

  const external = process.env.PLANTSTORE_TEST_DATABASE_URL
  if (external !== undefined && external !== '') {
    project.provide('postgresAdminUrl', external)
    project.provide('postgresServerIsTemporary', false)
    return async () => {}
  }
  let postgres
  try {
    postgres = await startEmbeddedPostgres()
  } catch (error) {
    throw new Error('could not start the embedded PostgreSQL for the tests (set PLANTSTORE_TEST_DATABASE_URL ' +
      `to use an external server): ${String(error)}`)
  }
  project.provide('postgresAdminUrl', postgres.adminUrl)
  project.provide('postgresServerIsTemporary', true)
  return () => postgres.destroy()
}
