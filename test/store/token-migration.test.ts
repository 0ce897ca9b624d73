import { copyFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { AccessTokenRegistry } from '../../src/auth/token-registry.js'
import { digestToken } from '../../src/auth/tokens.js'
import { postgresMigrations } from '../../src/store/postgres/migrations.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import Database from '../../src/store/sqlite/driver.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { bearer, buildTestApp, TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import { sqlOf } from '../helpers/migrations.js'

/**
 * test/fixtures/release-1.0.0.db was made by release 1.0.0 (schema version 1): its first start stored
 * the digest of this generated token, and it holds two plants.
 */
const RELEASE_1_TOKEN = 'release-1.0.0-generated-token-7d3e'
const RELEASE_1_TOKEN_CREATED_AT = '2026-11-23T11:57:24.002Z'
const RELEASE_1_PLANTS = '[{"id":-1,"name":"Ficus"},{"id":9007199254740993,"name":"Monstera deliciosa","tag":"tropical"}]'

/** The upgraded store serves release 1's plants to release 1's token, now initial-admin with every scope. */
async function expectUpgraded (store: PlantStore, createdAt: string): Promise<void> {
  const app = await buildTestApp({ store, tokens: [] })

  const plants = await app.inject({ method: 'GET', url: '/plants', headers: bearer(RELEASE_1_TOKEN) })
  const tokens = await app.inject({ method: 'GET', url: '/admin/tokens', headers: bearer(RELEASE_1_TOKEN) })
  const created = await app.inject({
    method: 'POST',
    url: '/admin/tokens',
    headers: { ...bearer(RELEASE_1_TOKEN), 'content-type': 'application/json' },
    payload: '{"name":"after-the-upgrade","scopes":["plants:read"]}'
  })

  expect(plants.body).toBe(RELEASE_1_PLANTS)
  expect(tokens.json()).toEqual([{
    id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
    name: 'initial-admin',
    scopes: ['plants:read', 'plants:write', 'admin'],
    source: 'store',
    createdAt
  }])
  expect(created.statusCode).toBe(201)
}

describe('Upgrading a database made by release 1.0.0', () => {
  it('on SQLite keeps its plants and its generated token, which becomes initial-admin', async () => {
    const file = join(temporaryFolder(), 'upgraded.db')
    copyFileSync(new URL('../fixtures/release-1.0.0.db', import.meta.url), file)

    await expectUpgraded(openSqliteStore(file), RELEASE_1_TOKEN_CREATED_AT)

    const upgraded = new Database(file, { readonly: true })
    onTestFinished(() => { upgraded.close() })
    expect(upgraded.pragma('user_version', { simple: true })).toBe(11)
    expect(upgraded.prepare("SELECT name FROM sqlite_master WHERE name = 'generated_access_token'").all()).toEqual([])
  })

  it('on PostgreSQL keeps its plants and its generated token, which becomes initial-admin', async () => {
    const url = await createTestDatabase()
    const release1 = new pg.Client({ connectionString: url })
    await release1.connect()
    try {
      // What release 1.0.0 left: its schema, its migration record, a generated token and two plants.
      await release1.query('CREATE TABLE plantstore_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())')
      await release1.query(sqlOf(postgresMigrations[0]))
      await release1.query("INSERT INTO plantstore_migrations (version, name) VALUES (1, 'plants and the generated access token')")
      await release1.query('INSERT INTO generated_access_token (singleton, sha256, created_at) VALUES (1, $1, $2)',
        [digestToken(RELEASE_1_TOKEN), RELEASE_1_TOKEN_CREATED_AT])
      await release1.query("INSERT INTO plants (id, name, tag) VALUES (9007199254740993, 'Monstera deliciosa', 'tropical'), (-1, 'Ficus', NULL)")
    } finally {
      await release1.end()
    }

    await expectUpgraded(await openPostgresStore(url, TEST_POSTGRES_OPTIONS), RELEASE_1_TOKEN_CREATED_AT)
  })

  it('warns at start when the upgraded generated token, which PLANTSTORE_TOKENS used to switch off, is live next to it', async () => {
    const file = join(temporaryFolder(), 'upgraded.db')
    copyFileSync(new URL('../fixtures/release-1.0.0.db', import.meta.url), file)

    const server = await startServer({ DATABASE_URL: `sqlite:${file}`, PLANTSTORE_TOKENS: 'upgrade-warning-token-61af' })
    const withOldToken = await fetch(`${server.baseUrl}/admin/tokens`, { headers: bearer(RELEASE_1_TOKEN) })

    expect(withOldToken.status).toBe(200)
    expect(server.stdout()).toContain('"level":40')
    expect(server.stdout()).toContain('the stored token \\"initial-admin\\" (all scopes; made by the first start, or the generated ' +
      'token of a release before 1.1, which PLANTSTORE_TOKENS used to switch off) is accepted next to PLANTSTORE_TOKENS: revoke it if it is not in use')
  })
})

describe('The first start', () => {
  it('makes initial-admin once on an empty store, and never again, even after it is revoked', async () => {
    const file = join(temporaryFolder(), 'first.db')
    const firstStore = openSqliteStore(file)
    const first = await new AccessTokenRegistry(firstStore.tokens).load()
    const registry = new AccessTokenRegistry(firstStore.tokens)
    await registry.refresh()
    const [initialAdmin] = await registry.list()
    await registry.revoke(initialAdmin?.id ?? '')
    await firstStore.close()

    const secondStore = openSqliteStore(file)
    onTestFinished(() => secondStore.close())
    const second = await new AccessTokenRegistry(secondStore.tokens).load()

    expect(first.initialAdminToken).toMatch(/^pst_[A-Za-z0-9_-]{43}$/)
    expect(initialAdmin).toMatchObject({ name: 'initial-admin', scopes: ['plants:read', 'plants:write', 'admin'], source: 'store' })
    expect(second.initialAdminToken).toBeUndefined()
  })

  it('makes exactly one initial-admin when instances start together on one PostgreSQL', async () => {
    const url = await createTestDatabase()
    const stores = await Promise.all([1, 2, 3].map(() => openPostgresStore(url, TEST_POSTGRES_OPTIONS)))
    onTestFinished(async () => { await Promise.all(stores.map((store) => store.close())) })

    const loaded = await Promise.all(stores.map((store) => new AccessTokenRegistry(store.tokens).load()))

    expect(loaded.filter((result) => result.initialAdminToken !== undefined)).toHaveLength(1)
    expect((await stores[0]?.tokens.list())?.map((token) => token.name)).toEqual(['initial-admin'])
  })

  it('makes no initial-admin when PLANTSTORE_TOKENS has entries', async () => {
    const store = openSqliteStore(join(temporaryFolder(), 'configured.db'))
    onTestFinished(() => store.close())

    const loaded = await new AccessTokenRegistry(store.tokens, [{ name: 'ci', scopes: ['plants:read'], digest: digestToken('ci-token-value') }]).load()

    expect(loaded.initialAdminToken).toBeUndefined()
    expect(await store.tokens.list()).toEqual([])
  })
})
