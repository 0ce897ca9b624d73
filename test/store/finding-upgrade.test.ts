/**
 * What finding plants asks of existing stores and of the databases they run on: a store of release 1.7.0
 * (schema version 7) gets its names folded, in batches, and is searched and ordered at once; an upgrade
 * cut short goes on; a search that reads for longer than the statement timeout is a 503 and holds no
 * other request; and a PostgreSQL role that may not create pg_trgm still starts and searches, the log
 * saying once what it lost and what an administrator runs.
 */
import { join } from 'node:path'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PlantStore } from '../../src/store/plant-store.js'
import { postgresMigrations } from '../../src/store/postgres/migrations.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import Database from '../../src/store/sqlite/driver.js'
import { sqliteMigrations } from '../../src/store/sqlite/migrations.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { bearer, buildTestApp, TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { sqlOf } from '../helpers/migrations.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

/** More than two batches of the backfill (5,000 plants each). */
const PLANTS = 12_001

/** A store as release 1.7.0 left it, with PLANTS plants named `Straße <i>`, on SQLite. */
function sqliteStoreOfRelease17 (file: string): void {
  const db = new Database(file)
  for (const migration of sqliteMigrations.filter((candidate) => candidate.version <= 7)) db.exec(sqlOf(migration))
  db.pragma('user_version = 7')
  db.exec(`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${PLANTS})
    INSERT INTO plants (id, name, tag) SELECT i, 'Straße ' || i, CASE WHEN i % 2 = 0 THEN 'even' END FROM n`)
  db.close()
}

/** API.md: a store that existed before the change log starts its log empty; the first write after is seq 1. */
async function expectChangeLogStartsEmpty (store: PlantStore): Promise<void> {
  const everything = { after: 0n, limit: 100, keptSince: 0 }
  expect(await store.changes.head()).toBe(0n)
  expect(await store.changes.read(everything)).toEqual({ status: 'page', changes: [] })
  expect(await store.changes.history({ id: 2n, limit: 10 })).toEqual([])
  await store.put({ id: 2n, name: 'Straße 2, renamed' })
  expect(await store.changes.head()).toBe(1n)
  const page = await store.changes.read(everything)
  expect(page.status === 'page' ? page.changes.map(({ seq, type, id }) => ({ seq, type, id })) : page).toEqual([{ seq: 1n, type: 'plant.updated', id: 2n }])
}

describe('A SQLite store of release 1.7.0', () => {
  it('is upgraded at open: every name folded, in batches, then searched and ordered by name; its change log starts empty', async () => {
    const file = join(temporaryFolder(), 'release-1.7.db')
    sqliteStoreOfRelease17(file)

    const store = openSqliteStore(file)
    onTestFinished(() => store.close())

    const inspector = new Database(file, { readonly: true })
    onTestFinished(() => { inspector.close() })
    expect(inspector.pragma('user_version', { simple: true })).toBe(11)
    expect(inspector.prepare('SELECT count(*) FROM plants WHERE name_folded IS NULL').pluck().get()).toBe(0)
    expect(inspector.prepare('SELECT name_folded FROM plants WHERE id = 12001').pluck().get()).toBe('strasse 12001')
    expect(JSON.parse((await store.list({ q: 'STRASSE 1200', limit: 3 })).json)).toEqual([
      { id: 1200, name: 'Straße 1200', tag: 'even' }, { id: 12000, name: 'Straße 12000', tag: 'even' }, { id: 12001, name: 'Straße 12001' }
    ])
    expect(await store.count({ q: 'ße 1' })).toBe(3113)
    expect(await store.count({ q: 'ße 1', tag: 'even' })).toBe(1556)
    expect(JSON.parse((await store.list({ order: '-name', limit: 2 })).json)).toEqual([{ id: 9999, name: 'Straße 9999' }, { id: 9998, name: 'Straße 9998', tag: 'even' }])

    await expectChangeLogStartsEmpty(store)
  })

  it('goes on from where an upgrade cut short stopped: some names folded, the others not yet', async () => {
    const file = join(temporaryFolder(), 'cut-short.db')
    sqliteStoreOfRelease17(file)
    const db = new Database(file)
    db.exec(sqlOf(sqliteMigrations.find((migration) => migration.version === 8)))
    db.pragma('user_version = 8')
    db.exec("UPDATE plants SET name_folded = lower(replace(name, 'ß', 'ss')) WHERE id <= 5000")
    db.close()

    const store = openSqliteStore(file)
    onTestFinished(() => store.close())

    expect(await store.count({ q: 'strasse' })).toBe(PLANTS)
    expect(await store.count({ q: 'ß' })).toBe(PLANTS)
  })

  it('ends a search that reads longer than the statement timeout with a 503, while other requests are answered', async () => {
    const file = join(temporaryFolder(), 'large.db')
    await openSqliteStore(file).close()
    const db = new Database(file)
    // Loaded without noting each plant for the search index: these searches read every folded name anyway.
    db.exec('DROP TRIGGER plant_search_pending_insert')
    db.exec(`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 120000)
      INSERT INTO plants (id, name, name_folded) SELECT i, printf('%.60c', 'x') || i, printf('%.60c', 'x') || i FROM n`)
    db.close()
    const app = await buildTestApp({ store: openSqliteStore(file, { statementTimeoutMs: 10 }) })
    const search = (url: string, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url, headers: { ...bearer(), ...headers } })

    // Reads and sorts 120,000 names, and counts the matches: many times the 10 ms (a few hundred ms on this machine).
    const slow = search('/plants?q=x1&sort=-name', { prefer: 'count=exact' })
    const meanwhile = await app.inject({ method: 'GET', url: '/plants/7', headers: bearer() })
    const answer = await slow

    expect(meanwhile.statusCode).toBe(200)
    expect({ status: answer.statusCode, retryAfter: answer.headers['retry-after'] }).toEqual({ status: 503, retryAfter: '1' })
    expect(answer.json().message).toMatch(/^storage is unavailable, retry later; request id /)
    // The search thread ended with it; the next search is served by a new one (retried, should a busy machine take 10 ms).
    await expect.poll(async () => (await search('/plants?tag=none', { prefer: 'count=exact' })).headers['x-total-count'], { timeout: 10_000 })
      .toBe('0')
  })
})

describe('SQLite\'s search index, brought up to date behind the writes', () => {
  it('finds what the writes changed at once, before and after the writer indexes it', async () => {
    const file = join(temporaryFolder(), 'index.db')
    const store = openSqliteStore(file)
    onTestFinished(() => store.close())
    const inspector = new Database(file, { readonly: true })
    onTestFinished(() => { inspector.close() })
    const pending = () => inspector.prepare('SELECT count(*) FROM plant_search_pending').pluck().get()
    const names = new Map<bigint, string>()
    const write = async (id: bigint, name: string | undefined) => {
      if (name === undefined) await store.delete(id)
      else await store.put({ id, name })
      if (name === undefined) names.delete(id)
      else names.set(id, name)
    }
    const expectSearches = async () => {
      for (const q of ['fern', 'moss', 'ivy', 'ern m', 'xyz']) {
        const expected = [...names].filter(([, name]) => name.toLowerCase().includes(q)).map(([id]) => id).sort((a, b) => a < b ? -1 : 1)
        const found = (JSON.parse((await store.list({ q, limit: 1000 })).json) as Array<{ id: number }>).map((plant) => BigInt(plant.id))
        expect({ q, found }).toEqual({ q, found: expected })
        expect({ q, count: await store.count({ q }) }).toEqual({ q, count: expected.length })
      }
    }

    for (let id = 1n; id <= 300n; id++) await write(id, `${id % 2n === 0n ? 'Fern' : 'Moss'} ${id}`)
    await expectSearches()
    await expect.poll(pending, { timeout: 10_000 }).toBe(0)
    await expectSearches()
    // Renamed, deleted, deleted and made again, renamed twice: noted again, the index holding the old names.
    for (let id = 1n; id <= 60n; id++) await write(id, id % 3n === 0n ? undefined : `Ivy fern m${id}`)
    for (let id = 3n; id <= 30n; id += 3n) await write(id, `Moss ${id}`)
    for (let id = 61n; id <= 70n; id++) await write(id, `Fern moss ${id}`)
    expect(pending()).toBeGreaterThan(0)
    await expectSearches()
    await expect.poll(pending, { timeout: 10_000 }).toBe(0)
    await expectSearches()
  })
})

describe('A PostgreSQL store of release 1.7.0', () => {
  it('is upgraded at start: every name folded, in batches, then searched and ordered by name; its change log starts empty', async () => {
    const url = await createTestDatabase()
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    onTestFinished(() => client.end())
    await client.query('CREATE TABLE plantstore_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())')
    for (const migration of postgresMigrations.filter((candidate) => candidate.version <= 7)) {
      await client.query(sqlOf(migration))
      await client.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
    }
    await client.query(`INSERT INTO plants (id, name, tag) SELECT i, 'Straße ' || i, CASE WHEN i % 2 = 0 THEN 'even' END FROM generate_series(1, ${PLANTS}) AS i`)

    const store = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => store.close())

    const { rows } = await client.query('SELECT max(version) AS version, count(*) FILTER (WHERE version >= 8) AS new FROM plantstore_migrations')
    expect(rows[0]).toEqual({ version: 11, new: '4' })
    expect((await client.query('SELECT count(*) FROM plants WHERE name_folded IS NULL')).rows[0]).toEqual({ count: '0' })
    expect(JSON.parse((await store.list({ q: 'STRASSE 1200', limit: 3 })).json)).toEqual([
      { id: 1200, name: 'Straße 1200', tag: 'even' }, { id: 12000, name: 'Straße 12000', tag: 'even' }, { id: 12001, name: 'Straße 12001' }
    ])
    expect(await store.count({ q: 'ße 1', tag: 'even' })).toBe(1556)
    await expectChangeLogStartsEmpty(store)
  })

  it('builds migration 10\'s indexes however long they take: past DATABASE_STATEMENT_TIMEOUT_MS and the client\'s time-out above it', async () => {
    const url = await createTestDatabase()
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    onTestFinished(() => client.end())
    await client.query('CREATE TABLE plantstore_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())')
    for (const migration of postgresMigrations.filter((candidate) => candidate.version <= 9)) {
      if ('sql' in migration) await client.query(sqlOf(migration))
      await client.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
    }
    await client.query("INSERT INTO plants (id, name, name_folded) VALUES (1, 'Fern', 'fern')")
    // Another transaction holds a lock that CREATE INDEX waits for, for longer than both time-outs.
    const holder = new pg.Client({ connectionString: url })
    await holder.connect()
    onTestFinished(() => holder.end())
    await holder.query('BEGIN; LOCK TABLE plants IN ROW EXCLUSIVE MODE')
    const released = new Promise((resolve) => setTimeout(resolve, 2500)).then(() => holder.query('COMMIT'))

    const started = performance.now()
    const store = await openPostgresStore(url, { ...TEST_POSTGRES_OPTIONS, statementTimeoutMs: 300 })
    onTestFinished(() => store.close())
    await released

    expect(performance.now() - started).toBeGreaterThan(2000)
    expect((await client.query('SELECT max(version) AS version FROM plantstore_migrations')).rows[0]).toEqual({ version: 11 })
    expect(JSON.parse((await store.list({ order: 'name', limit: 10 })).json)).toEqual([{ id: 1, name: 'Fern' }])
  })

  it('starts and searches where the role may not create pg_trgm, saying once what was lost and what an administrator runs', async () => {
    const url = new URL(await createTestDatabase())
    const admin = new pg.Client({ connectionString: url.toString() })
    await admin.connect()
    onTestFinished(() => admin.end())
    const role = `plantstore_limited_${url.pathname.slice(-12)}`
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'limited'`)
    await admin.query(`GRANT CONNECT ON DATABASE ${url.pathname.slice(1)} TO ${role}; GRANT CREATE, USAGE ON SCHEMA public TO ${role}`)
    url.username = role
    url.password = 'limited'
    const messages: string[] = []

    const store = await openPostgresStore(url.toString(), { ...TEST_POSTGRES_OPTIONS, upkeepLog: { info: (message) => messages.push(message), warn: (message) => messages.push(message) } })
    onTestFinished(() => store.close())
    await store.create({ id: 1n, name: 'Straße' })

    await expect.poll(() => messages.length, { timeout: 10_000 }).toBe(1)
    expect(messages[0]).toMatch(/^searches read every name, within DATABASE_STATEMENT_TIMEOUT_MS, because this role cannot create the extension pg_trgm \(permission denied to create extension "pg_trgm"\); to serve them from a trigram index an administrator runs, on this database: CREATE EXTENSION IF NOT EXISTS pg_trgm; CREATE INDEX CONCURRENTLY IF NOT EXISTS plants_name_trigrams ON plants USING gin \(name_folded gin_trgm_ops\);$/)
    expect(JSON.parse((await store.list({ q: 'STRASSE', limit: 10 })).json)).toEqual([{ id: 1, name: 'Straße' }])
    expect((await admin.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")).rowCount).toBe(0)
  })
})
