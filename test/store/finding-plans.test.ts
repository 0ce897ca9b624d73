/**
 * Pages in name order and searches are read from indexes, not by reading every plant: the query plans of
 * the statements each backend runs, on 20,000 plants after ANALYZE (VACUUM ANALYZE on PostgreSQL). A search shorter than three
 * characters reads every folded name by design (the trigram indexes cannot serve it).
 */
import { join } from 'node:path'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PageRequest } from '../../src/store/plant-store.js'
import { countStatement, pageStatement } from '../../src/store/postgres/plant-pages.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import Database from '../../src/store/sqlite/driver.js'
import { PlantPages } from '../../src/store/sqlite/plant-pages.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

const ROWS = 20_000
const AFTER = { name: 'Plant 5000', id: 5000n }

/** Each statement shape a listing can need, by what it asks. */
const PAGES: ReadonlyArray<readonly [string, PageRequest]> = [
  ['name', { order: 'name', limit: 100 }],
  ['name after', { order: 'name', limit: 100, after: AFTER }],
  ['-name', { order: '-name', limit: 100 }],
  ['-name after', { order: '-name', limit: 100, after: AFTER }],
  ['tag name', { order: 'name', tag: 'tag-1', limit: 100 }],
  ['tag name after', { order: 'name', tag: 'tag-1', limit: 100, after: AFTER }],
  ['-id after', { order: '-id', limit: 100, after: 5000n }],
  ['search name', { order: 'name', q: 'nt 123', limit: 100 }],
  ['search id', { q: 'nt 123', limit: 100 }],
  ['search tag name', { order: 'name', q: 'nt 123', tag: 'tag-1', limit: 100 }]
]

describe('Query plans on SQLite', () => {
  it('read name orders from plants_name_id or plants_tag_name_id without sorting, and searches from the trigram index', async () => {
    const file = join(temporaryFolder(), 'plans.db')
    await openSqliteStore(file).close()
    const db = new Database(file)
    onTestFinished(() => { db.close() })
    db.exec(`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})
      INSERT INTO plants (id, name, tag, name_folded) SELECT i, 'Plant ' || i, 'tag-' || (i % 5), 'plant ' || i FROM n`)
    db.exec('ANALYZE')
    const prepared: string[] = []
    const prepare = db.prepare.bind(db)
    db.prepare = ((sql: string) => { prepared.push(sql); return prepare(sql) }) as typeof db.prepare
    const pages = new PlantPages(db)
    const plans: Record<string, string> = {}
    const planOf = (sql: string) => {
      const values = { tag: 'tag-1', afterId: 5000n, afterName: 'Plant 5000', limit: 101, phrase: '"nt 123"', folded: 'pl' }
      const named = Object.fromEntries([...sql.matchAll(/@(\w+)/g)].map(([, name]) => [name, values[name as keyof typeof values]]))
      return (prepare(`EXPLAIN QUERY PLAN ${sql}`).all(named) as Array<{ detail: string }>).map((step) => step.detail).join(' | ')
    }

    for (const [name, request] of PAGES) {
      pages.page(request)
      plans[name] = planOf(prepared.at(-1) as string)
    }
    pages.count({ tag: 'tag-1' })
    plans['count tag'] = planOf(prepared.at(-1) as string)
    pages.count({ q: 'nt 123' })
    plans['count search'] = planOf(prepared.at(-1) as string)

    // The index's matches but the noted plants (a short table: the writer indexes them within a second), and
    // the noted plants whose names hold the search.
    const matches = 'MERGE (UNION) | LEFT | MERGE (EXCEPT) | LEFT | SCAN plant_name_search VIRTUAL TABLE INDEX 64:M1 | RIGHT | ' +
      'SCAN plant_search_pending | RIGHT | SCAN plant_search_pending | SEARCH plants USING INTEGER PRIMARY KEY (rowid=?)'
    const fromSearchIndex = `SEARCH plants USING INTEGER PRIMARY KEY (rowid=?) | LIST SUBQUERY 3 | ${matches}`
    expect(plans).toEqual({
      name: 'SCAN plants USING INDEX plants_name_id',
      'name after': 'SEARCH plants USING INDEX plants_name_id (name>?)',
      '-name': 'SCAN plants USING INDEX plants_name_id',
      '-name after': 'SEARCH plants USING INDEX plants_name_id (name<?)',
      'tag name': 'SEARCH plants USING COVERING INDEX plants_tag_name_id (tag=?)',
      'tag name after': 'SEARCH plants USING COVERING INDEX plants_tag_name_id (tag=? AND name>?)',
      '-id after': 'SEARCH plants USING INTEGER PRIMARY KEY (rowid<?)',
      'search name': `${fromSearchIndex} | USE TEMP B-TREE FOR ORDER BY`,
      'search id': fromSearchIndex,
      'search tag name': `${fromSearchIndex} | USE TEMP B-TREE FOR ORDER BY`,
      'count tag': 'SEARCH plants USING COVERING INDEX plants_tag_name_id (tag=?)',
      'count search': `CO-ROUTINE (subquery-3) | ${matches} | SCAN (subquery-3)`
    })
  })
})

interface PlanNode { 'Node Type': string, 'Index Name'?: string, Plans?: PlanNode[] }

function nodesOf (node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)]
}

describe('Query plans on PostgreSQL', () => {
  it('read name orders from plants_name_id or plants_tag_name_id without sorting, and searches from the trigram index the service builds', async () => {
    const url = await createTestDatabase()
    const messages: string[] = []
    const store = await openPostgresStore(url, { ...TEST_POSTGRES_OPTIONS, upkeepLog: { info: (message) => messages.push(message), warn: (message) => messages.push(message) } })
    onTestFinished(() => store.close())
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    onTestFinished(() => client.end())
    await client.query(`INSERT INTO plants (id, name, tag, name_folded)
      SELECT i, 'Plant ' || i, 'tag-' || (i % 5), 'plant ' || i FROM generate_series(1, ${ROWS}) AS i ORDER BY (i * 7919) % ${ROWS}`)
    await expect.poll(() => messages.length, { timeout: 20_000 }).toBe(2)
    // VACUUM moves the rows GIN keeps in its pending list into the index proper, as autovacuum does at a
    // moment of its own choosing: pending rows make the planner cost the trigram index too high to use.
    await client.query('VACUUM ANALYZE plants')
    const plans: Record<string, string[]> = {}
    const planOf = async ({ statement, values }: { statement: { text: string }, values: unknown[] }) => {
      const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>({ text: `EXPLAIN (FORMAT JSON) ${statement.text}`, values })
      return nodesOf(rows[0]?.['QUERY PLAN'][0]?.Plan as PlanNode).map((node) => `${node['Node Type']}${node['Index Name'] === undefined ? '' : ` ${node['Index Name']}`}`)
    }

    for (const [name, request] of PAGES) plans[name] = await planOf(pageStatement(request))
    plans['count tag'] = await planOf(countStatement({ tag: 'tag-1' }))
    plans['count search'] = await planOf(countStatement({ q: 'nt 123' }))

    for (const name of ['name', 'name after', '-name', '-name after']) {
      expect({ name, plan: plans[name] }).toEqual({ name, plan: ['Limit', expect.stringMatching(/^Index Scan plants_name_id$/)] })
    }
    for (const name of ['tag name', 'tag name after']) {
      expect({ name, plan: plans[name] }).toEqual({ name, plan: ['Limit', expect.stringMatching(/^Index (Only )?Scan plants_tag_name_id$/)] })
    }
    expect(plans['-id after']).toEqual(['Limit', 'Index Scan plants_pkey'])
    for (const name of ['search name', 'search id', 'search tag name', 'count search']) {
      expect({ name, usesTrigrams: plans[name]?.some((node) => node === 'Bitmap Index Scan plants_name_trigrams') })
        .toEqual({ name, usesTrigrams: true })
      expect({ name, scansPlants: plans[name]?.some((node) => node.startsWith('Seq Scan')) }).toEqual({ name, scansPlants: false })
    }
    expect(plans['count tag']?.some((node) => /^(Bitmap )?Index (Only )?Scan plants_tag_(name_)?id$/.test(node))).toBe(true)
    expect(plans['count tag']?.some((node) => node.startsWith('Seq Scan'))).toBe(false)
    expect(messages).toEqual(['building the search index plants_name_trigrams; searches read every name until it is built',
      expect.stringMatching(/^the search index plants_name_trigrams is built \(\d+\.\d s\)$/)])
  })
})
