import { join } from 'node:path'
import Database from '../../src/store/sqlite/driver.js'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { StoreUnavailableError } from '../../src/store/plant-store.js'
import { SchemaTooNewError } from '../../src/store/migration.js'
import { openStore } from '../../src/store/open-store.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { openSqliteDatabase } from '../../src/store/sqlite/connection.js'
import { backends, TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { freePort } from '../../scripts/embedded-postgres.js'
import { storeContract } from './contract.js'

for (const backend of backends) storeContract(backend.name, backend.open)

describe('the SQLite adapter', () => {
  it('keeps plants across a reopen of the same file', async () => {
    const file = join(temporaryFolder(), 'reopen.db')
    const first = openSqliteStore(file)
    await first.create({ id: 9n, name: 'Fern', tag: 'green' })
    await first.close()

    const second = openSqliteStore(file)
    onTestFinished(() => second.close())

    expect(await second.create({ id: 9n, name: 'Fern', tag: 'green' })).toMatchObject({ status: 'replayed' })
  })

  it('creates the parent folder and opens WAL with synchronous=FULL, also on an existing file', async () => {
    const file = join(temporaryFolder(), 'nested', 'deeper', 'plants.db')
    const created = openSqliteDatabase(file)
    created.close()
    const reopened = openSqliteDatabase(file)
    onTestFinished(() => { reopened.close() })

    expect(reopened.pragma('journal_mode', { simple: true })).toBe('wal')
    expect(reopened.pragma('synchronous', { simple: true })).toBe(2n)
    expect(reopened.pragma('busy_timeout', { simple: true })).toBe(250n)
    expect(reopened.pragma('user_version', { simple: true })).toBe(11n)
  })

  it('refuses a database whose schema is newer than the code', () => {
    const file = join(temporaryFolder(), 'future.db')
    const future = new Database(file)
    future.pragma('user_version = 99')
    future.close()

    expect(() => openSqliteStore(file)).toThrow(SchemaTooNewError)
    expect(() => openSqliteStore(file)).toThrow('the database schema is at version 99, newer than this plantstore knows (11)')
  })

  it('reports a write lock held past busy_timeout as StoreUnavailableError', async () => {
    const file = join(temporaryFolder(), 'busy.db')
    const store = openSqliteStore(file, { busyTimeoutMs: 20 })
    onTestFinished(() => store.close())
    const other = new Database(file)
    onTestFinished(() => { other.close() })
    other.exec('BEGIN IMMEDIATE')

    await expect(store.create({ id: 1n, name: 'Fern' })).rejects.toBeInstanceOf(StoreUnavailableError)
    other.exec('ROLLBACK')
    await expect(store.create({ id: 1n, name: 'Fern' })).resolves.toMatchObject({ status: 'created' })
  })
})

describe('the PostgreSQL adapter', () => {
  it('records applied migrations and refuses a database whose schema is newer than the code', async () => {
    const url = await createTestDatabase()
    await (await openPostgresStore(url, TEST_POSTGRES_OPTIONS)).close()
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    onTestFinished(() => client.end())
    const applied = await client.query('SELECT version, name FROM plantstore_migrations ORDER BY version')
    await client.query("INSERT INTO plantstore_migrations (version, name) VALUES (99, 'from the future')")

    expect(applied.rows).toEqual([
      { version: 1, name: 'plants and the generated access token' },
      { version: 2, name: 'access tokens as data: names, scopes, expiry, revocation' },
      { version: 3, name: 'an index for the pages of one tag' },
      { version: 4, name: 'webhook subscriptions, their outbox and delivery attempts' },
      { version: 5, name: 'the record of a store copied into this one' },
      { version: 6, name: 'the previous signing secret of a webhook subscription, for the grace period of a rotation' },
      { version: 7, name: 'an index of the due outbox rows of each webhook subscription' },
      { version: 8, name: 'the folded name a search matches' },
      { version: 9, name: 'the folded names of the plants stored before version 8' },
      { version: 10, name: 'indexes for pages in name order' },
      { version: 11, name: 'the change log' }
    ])
    await expect(openPostgresStore(url, TEST_POSTGRES_OPTIONS)).rejects.toThrow(
      'the database schema is at version 99, newer than this plantstore knows (11)')
  })

  it('opens while the database is unreachable and reports StoreUnavailableError until it answers', async () => {
    const store = await openPostgresStore(`postgres://nobody:pw@127.0.0.1:${await freePort()}/none`, {
      ...TEST_POSTGRES_OPTIONS, connectTimeoutMs: 500
    })
    onTestFinished(() => store.close())

    await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError)
    await expect(store.create({ id: 1n, name: 'Fern' })).rejects.toBeInstanceOf(StoreUnavailableError)
  })
})

describe('openStore', () => {
  it.each([
    ['memory:', 'memory'],
    ['sqlite:FILE', 'sqlite']
  ])('picks the adapter from %s', async (url, backend) => {
    const store = await openStore(url.replace('FILE', join(temporaryFolder(), 'x.db')), TEST_POSTGRES_OPTIONS)
    onTestFinished(() => store.close())

    expect(store.backend).toBe(backend)
  })

  it.each(['postgres', 'postgresql'])('picks the PostgreSQL adapter from a %s:// URL', async (scheme) => {
    const url = (await createTestDatabase()).replace(/^postgres:/, `${scheme}:`)

    const store = await openStore(url, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => store.close())

    expect(store.backend).toBe('postgres')
  })
})
