import { copyFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { postgresMigrations } from '../../src/store/postgres/migrations.js'
import { sqliteMigrations } from '../../src/store/sqlite/migrations.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import Database from '../../src/store/sqlite/driver.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { sqlOf } from '../helpers/migrations.js'

/** Only a statement of a tag page compares the tag with a parameter. */
const TAG_PAGE = /\btag = (\?|\$1|@tag)/

const ROWS = 20_000
const TAGS = 5
const CURSOR = ROWS / 2

/** `ROWS` plants, one in ten without a tag, the others spread over `TAGS` tags. */
const sqlitePlants = `
  WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})
  INSERT INTO plants (id, name, tag)
  SELECT i, 'plant ' || i, CASE WHEN i % 10 = 0 THEN NULL ELSE 'tag-' || (i % ${TAGS}) END FROM n`

/**
 * The same plants for PostgreSQL, stored in an order unrelated to their ids, as client-chosen ids are.
 * Stored in id order, the planner may rightly prefer walking the primary key and filtering on so small
 * a table, or reading a few hundred rows and sorting them: the plan this test holds the statements to
 * is the one that matters once a tag has more plants than a page.
 */
const postgresPlants = `
  INSERT INTO plants (id, name, tag)
  SELECT i, 'plant ' || i, CASE WHEN i % 10 = 0 THEN NULL ELSE 'tag-' || (i % ${TAGS}) END
  FROM generate_series(1, ${ROWS}) AS i ORDER BY (i * 7919) % ${ROWS}`

describe('The pages of one tag on SQLite', () => {
  it('are read through the index plants_tag_id in id order, with no sort, before and after ANALYZE', async () => {
    const file = join(temporaryFolder(), 'plants.db')
    const prepare = vi.spyOn(Database.prototype, 'prepare')
    onTestFinished(() => { prepare.mockRestore() })
    const store = openSqliteStore(file)
    onTestFinished(() => store.close())
    // Statements are prepared as each shape of page is first read.
    await store.list({ limit: 100, tag: 'tag-1' })
    await store.list({ limit: 100, tag: 'tag-1', after: 1n })
    const statements = prepare.mock.calls.map(([sql]) => sql).filter((sql) => TAG_PAGE.test(sql))
    prepare.mockRestore()
    const inspector = new Database(file)
    onTestFinished(() => { inspector.close() })
    const plansOf = () => statements.map((sql) => inspector.prepare(`EXPLAIN QUERY PLAN ${sql}`)
      .all(sql.includes('@afterId') ? { tag: 'tag-1', afterId: CURSOR, limit: 101 } : { tag: 'tag-1', limit: 101 })
      .map((step) => (step as { detail: string }).detail))

    const empty = plansOf()
    inspector.exec(sqlitePlants)
    inspector.exec('ANALYZE')
    const analyzed = plansOf()

    expect(statements).toHaveLength(2)
    const expected = [
      ['SEARCH plants USING COVERING INDEX plants_tag_id (tag=?)'],
      ['SEARCH plants USING COVERING INDEX plants_tag_id (tag=? AND id>?)']
    ]
    expect(statements[0]).not.toContain('@afterId')
    expect(empty).toEqual(expected)
    expect(analyzed).toEqual(expected)
    expect(JSON.parse((await store.list({ after: BigInt(ROWS - 20), limit: 2, tag: 'tag-1' })).json)).toEqual([
      { id: ROWS - 19, name: `plant ${ROWS - 19}`, tag: 'tag-1' }, { id: ROWS - 14, name: `plant ${ROWS - 14}`, tag: 'tag-1' }
    ])
  })

  it('gets its index when a database made by release 1.0.0 is upgraded', async () => {
    const file = join(temporaryFolder(), 'upgraded.db')
    copyFileSync(new URL('../fixtures/release-1.0.0.db', import.meta.url), file)

    await openSqliteStore(file).close()

    const upgraded = new Database(file, { readonly: true })
    onTestFinished(() => { upgraded.close() })
    expect(upgraded.pragma('user_version', { simple: true })).toBe(11)
    expect(upgraded.prepare("SELECT tbl_name, sql FROM sqlite_master WHERE type = 'index' AND name = 'plants_tag_id'").all())
      .toEqual([{ tbl_name: 'plants', sql: 'CREATE INDEX plants_tag_id ON plants (tag, id, name)' }])
  })

  it('are served from a version-2 database once it is upgraded, with its plants', async () => {
    const file = join(temporaryFolder(), 'version-2.db')
    const version2 = new Database(file)
    for (const migration of sqliteMigrations.slice(0, 2)) version2.exec(sqlOf(migration))
    version2.pragma('user_version = 2')
    version2.exec("INSERT INTO plants (id, name, tag) VALUES (3, 'Fern', 'green'), (1, 'Ivy', 'green'), (2, 'Rose', 'red'), (4, 'Moss', NULL)")
    version2.close()

    const store = openSqliteStore(file)
    onTestFinished(() => store.close())

    expect(await store.list({ limit: 10, tag: 'green' })).toEqual({
      json: '[{"id":1,"name":"Ivy","tag":"green"},{"id":3,"name":"Fern","tag":"green"}]'
    })
    const upgraded = new Database(file, { readonly: true })
    onTestFinished(() => { upgraded.close() })
    expect(upgraded.pragma('user_version', { simple: true })).toBe(11)
    expect(upgraded.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'plants' ORDER BY name").pluck().all())
      .toEqual(['plants_name_id', 'plants_tag_id', 'plants_tag_name_id'])
  })
})

interface PlanNode { 'Node Type': string, 'Index Name'?: string, Plans?: PlanNode[] }

function nodesOf (node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)]
}

describe('The pages of one tag on PostgreSQL', () => {
  it('are read through the index plants_tag_id in id order, with no sort, for the default and the largest page', async () => {
    const url = await createTestDatabase()
    const query = vi.spyOn(pg.Pool.prototype, 'query')
    onTestFinished(() => { query.mockRestore() })
    const store = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => store.close())
    const inspector = new pg.Client({ connectionString: url })
    await inspector.connect()
    onTestFinished(() => inspector.end())
    await inspector.query(postgresPlants)
    await inspector.query('ANALYZE plants')

    await store.list({ limit: 100, tag: 'tag-1' })
    await store.list({ after: BigInt(CURSOR), limit: 100, tag: 'tag-1' })
    const statements = query.mock.calls
      .map(([config]) => (typeof config === 'string' ? config : (config as pg.QueryConfig).text))
      .filter((text) => TAG_PAGE.test(text))
    query.mockRestore()
    await inspector.query(`PREPARE tag_first AS ${statements[0]}`)
    await inspector.query(`PREPARE tag_after AS ${statements[1]}`)
    const plans: Record<string, PlanNode[]> = {}
    for (const mode of ['force_custom_plan', 'force_generic_plan']) {
      await inspector.query(`SET plan_cache_mode = ${mode}`)
      for (const limit of [101, 1001]) {
        for (const execute of [`tag_first('tag-1', ${limit})`, `tag_after('tag-1', ${CURSOR}, ${limit})`]) {
          const { rows } = await inspector.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) EXECUTE ${execute}`)
          plans[`${mode} ${execute}`] = nodesOf(rows[0]?.['QUERY PLAN'][0]?.Plan as PlanNode)
        }
      }
    }

    expect(statements).toHaveLength(2)
    expect(statements[0]).not.toContain('id >')
    expect(statements[1]).toContain('id > $2')
    expect(Object.keys(plans)).toHaveLength(8)
    for (const [name, nodes] of Object.entries(plans)) {
      expect({ name, types: nodes.map((node) => node['Node Type']) }).toEqual({ name, types: ['Limit', expect.stringMatching(/^Index (Only )?Scan$/)] })
      expect({ name, index: nodes[1]?.['Index Name'] }).toEqual({ name, index: 'plants_tag_id' })
    }
  })

  it('are served from a version-2 database once it is upgraded, which gets the index', async () => {
    const url = await createTestDatabase()
    const version2 = new pg.Client({ connectionString: url })
    await version2.connect()
    onTestFinished(() => version2.end())
    await version2.query('CREATE TABLE plantstore_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())')
    for (const migration of postgresMigrations.slice(0, 2)) {
      await version2.query(sqlOf(migration))
      await version2.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
    }
    await version2.query("INSERT INTO plants (id, name, tag) VALUES (3, 'Fern', 'green'), (1, 'Ivy', 'green'), (2, 'Rose', 'red'), (4, 'Moss', NULL)")

    const store = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => store.close())

    expect(await store.list({ limit: 10, tag: 'green' })).toEqual({
      json: '[{"id":1,"name":"Ivy","tag":"green"},{"id":3,"name":"Fern","tag":"green"}]'
    })
    const versions = await version2.query('SELECT version FROM plantstore_migrations ORDER BY version')
    const indexes = await version2.query("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'plants' AND indexname = 'plants_tag_id'")
    expect(versions.rows).toEqual([{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }, { version: 5 }, { version: 6 }, { version: 7 }, { version: 8 }, { version: 9 }, { version: 10 }, { version: 11 }])
    expect(indexes.rows).toEqual([{ indexname: 'plants_tag_id', indexdef: 'CREATE INDEX plants_tag_id ON public.plants USING btree (tag, id)' }])
  })
})
