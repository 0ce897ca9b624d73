import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { inject, onTestFinished } from 'vitest'

/**
 * Creates an empty database on the test PostgreSQL for the current test and returns its URL. On a server
 * the run keeps (PLANTSTORE_TEST_DATABASE_URL, or `adminUrl` given) it is dropped when the test ends. On
 * the run's embedded server, which is removed with its folder when the run ends, it is left: a DROP
 * DATABASE costs a checkpoint, about 0.2 s, and the suite makes hundreds of databases.
 */
export async function createTestDatabase (adminUrl = inject('postgresAdminUrl')): Promise<string> {
  const { url, drop } = await createSuiteDatabase(adminUrl)
  onTestFinished(drop)
  return url
}

/**
 * As createTestDatabase, for the tests of a whole suite (made in `beforeAll`, where no test is running):
 * `drop` (in `afterAll`) drops it, except on the run's embedded server.
 */
export async function createSuiteDatabase (adminUrl = inject('postgresAdminUrl')): Promise<{ readonly url: string, readonly drop: () => Promise<void> }> {
  const name = `plantstore_test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const runsServer = adminUrl === inject('postgresAdminUrl') && inject('postgresServerIsTemporary')
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: runsServer ? async () => {} : () => dropDatabase(adminUrl, name) }
}

async function dropDatabase (adminUrl: string, name: string): Promise<void> {
  const dropper = new pg.Client({ connectionString: adminUrl })
  try {
    await dropper.connect()
    await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  } catch {
    // The server may be stopped by the test itself; its folder is removed with it.
  } finally {
    await dropper.end().catch(() => {})
  }
}
