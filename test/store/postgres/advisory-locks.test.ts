import { randomBytes, randomUUID } from 'node:crypto'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { ADVISORY_LOCK_KEYS } from '../../../src/store/postgres/advisory-locks.js'
import { openPostgresStore } from '../../../src/store/postgres/store.js'
import { TEST_POSTGRES_OPTIONS } from '../../helpers/app.js'
import { createTestDatabase } from '../../helpers/postgres-database.js'

async function connected (url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  onTestFinished(() => client.end())
  return client
}

describe('PostgreSQL advisory locks', () => {
  it('has a key of its own for each purpose', () => {
    const keys = Object.values(ADVISORY_LOCK_KEYS)
    expect(new Set(keys).size).toBe(keys.length)
  })

  it('lets tokens be made and revoked while another instance builds the search index', async () => {
    const url = await createTestDatabase()
    const store = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => store.close())
    const observer = await connected(url)
    // A writer's open transaction keeps CREATE INDEX CONCURRENTLY waiting: the build is under way for as long as it lasts.
    const writer = await connected(url)
    await writer.query('BEGIN; LOCK TABLE plants IN ROW EXCLUSIVE MODE')
    const upkeepLog: string[] = []
    const building = await openPostgresStore(url, { ...TEST_POSTGRES_OPTIONS, upkeepLog: { info: (line) => upkeepLog.push(line), warn: (line) => upkeepLog.push(line) } })
    onTestFinished(() => building.close())
    const buildWaits = async () => (await observer.query(`SELECT count(*)::int AS waiting FROM pg_stat_activity
      WHERE application_name = 'plantstore-search-index' AND datname = current_database() AND query LIKE 'CREATE INDEX CONCURRENTLY%' AND wait_event_type = 'Lock'`)).rows[0].waiting as number
    await expect.poll(buildWaits, { timeout: 10_000, interval: 50 }).toBe(1)

    const token = { id: randomUUID(), name: 'made-while-indexing', scopes: ['plants:read'] as const, createdAt: new Date(), digest: randomBytes(32) }
    expect(await store.tokens.create({ ...token, scopes: [...token.scopes] })).toBe('created')
    expect(await store.tokens.create({ ...token, id: randomUUID(), scopes: [...token.scopes] })).toBe('name-taken')
    const revokedAt = new Date()
    expect(await store.tokens.revoke(token.id, revokedAt)).toEqual({ id: token.id, name: token.name, scopes: ['plants:read'], createdAt: token.createdAt, revokedAt })
    expect(await buildWaits()).toBe(1)

    await writer.query('COMMIT')
    const indexValid = async () => (await observer.query("SELECT bool_and(i.indisvalid) AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'plants_name_trigrams'")).rows[0].valid as boolean | null
    await expect.poll(indexValid, { timeout: 10_000, interval: 50 }).toBe(true)
    expect(upkeepLog).toEqual([
      'building the search index plants_name_trigrams; searches read every name until it is built',
      expect.stringMatching(/^the search index plants_name_trigrams is built \(\d+\.\d s\)$/)
    ])
  })
})
