import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { inject, onTestFinished } from 'vitest'

/**
 * Creates an empty database on the test PostgreSQL for the current test, dropped when it ends, and
 * returns its URL. `adminUrl` defaults to the run's shared server.
 */
export async function createTestDatabase (adminUrl = inject('postgresAdminUrl')): Promise<string> {
  const name = `plantstore_test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  onTestFinished(async () => {
    const dropper = new pg.Client({ connectionString: adminUrl })
    try {
      await dropper.connect()
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    } catch {
      // The server may be stopped by the test itself; its folder is removed with it.
    } finally {
      await dropper.end().catch(() => {})
    }
  })
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}
