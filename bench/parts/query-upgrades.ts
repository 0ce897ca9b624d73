import { copyFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { postgresMigrations } from '../../src/store/postgres/migrations.js'
import Database from '../../src/store/sqlite/driver.js'
import { sqliteMigrations } from '../../src/store/sqlite/migrations.js'
import type { Harness } from '../harness.js'
import { catalogBatches } from '../plant-catalog.js'
import { ROOT, type Target } from '../processes.js'
import { formatTable } from '../report.js'

/**
 * The query part's upgrades phase (query.ts): a store of release 1.7.0 with as many plants, upgraded by
 * this build, each migration timed.
 */

/** How long a start that migrates a large store may take. */
const UPGRADE_TIMEOUT_MS = 30 * 60_000

const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1)

/** Resolves when a line of the target's log holds `text`; rejects after `timeoutMs`. */
async function logLine (harness: Harness, target: Target, text: string, timeoutMs: number): Promise<string> {
  const started = performance.now()
  for (;;) {
    const line = harness.servers.log(target).split('\n').find((candidate) => candidate.includes(text))
    if (line !== undefined) return line
    if (target.process.exitCode !== null) throw new Error(`${target.name} exited:\n${harness.servers.log(target).slice(-3000)}`)
    if (performance.now() - started > timeoutMs) throw new Error(`${target.name}: no "${text}" in its log within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/**
 * Starts this build's service on `databaseUrl`: seconds from its spawn to its "ready" line, and the
 * service. A start that listens but is not ready (a PostgreSQL migration that failed, say) fails.
 */
async function timedStart (harness: Harness, name: string, databaseUrl: string): Promise<{ seconds: number, target: Target }> {
  const started = performance.now()
  const target = await harness.servers.startService(name, databaseUrl, {}, ROOT, [], UPGRADE_TIMEOUT_MS)
  const line = await Promise.race([logLine(harness, target, 'ready: serving', UPGRADE_TIMEOUT_MS), logLine(harness, target, 'but not ready', UPGRADE_TIMEOUT_MS)])
  if (!line.includes('ready: serving')) throw new Error(`${name} did not become ready: ${line}`)
  return { seconds: Number(((performance.now() - started) / 1000).toFixed(2)), target }
}

/** A SQLite store of release 1.7.0 (schema version 7), as finding-upgrade.test.ts makes one, with the catalog's plants. */
function sqliteStoreOfRelease17 (file: string, size: number): void {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  for (const migration of sqliteMigrations.filter((candidate) => candidate.version <= 7)) if ('sql' in migration) db.exec(migration.sql)
  db.pragma('user_version = 7')
  const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
  const insertBatch = db.transaction((rows: { ids: number[], names: string[], tags: string[] }) => {
    for (let at = 0; at < rows.ids.length; at++) insert.run(rows.ids[at], rows.names[at], rows.tags[at])
  })
  for (const rows of catalogBatches(size, 50_000)) insertBatch(rows)
  db.pragma('wal_checkpoint(TRUNCATE)')
  db.close()
}

/** Applies versions 8 and up to a copy of a version-7 file as connection.ts's `migrate` does, timing each: seconds by version. */
function timeSqliteMigrations (file: string): Record<string, number> {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.defaultSafeIntegers(true)
  const times: Record<string, number> = {}
  try {
    for (const migration of sqliteMigrations.filter((candidate) => candidate.version > 7)) {
      const started = performance.now()
      if ('sql' in migration) {
        db.transaction(() => { db.exec(migration.sql) }).immediate()
      } else {
        while (db.transaction(() => migration.backfillBatch(db)).immediate() > 0);
      }
      db.pragma(`user_version = ${migration.version}`)
      times[migration.version] = Number(((performance.now() - started) / 1000).toFixed(2))
    }
  } finally {
    db.close()
  }
  return times
}

async function postgresStoreOfRelease17 (databaseUrl: string, size: number): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query('CREATE TABLE plantstore_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())')
    for (const migration of postgresMigrations.filter((candidate) => candidate.version <= 7)) {
      if (!('sql' in migration)) continue
      await client.query(migration.sql)
      await client.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
    }
    for (const rows of catalogBatches(size, 50_000)) {
      await client.query('INSERT INTO plants (id, name, tag) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])', [rows.ids, rows.names, rows.tags])
    }
    // A store in use has been vacuumed and analyzed.
    await client.query('VACUUM ANALYZE plants')
  } finally {
    await client.end()
  }
}

/** A copy of a PostgreSQL database (CREATE DATABASE … TEMPLATE: nobody may be connected to it): the copy's URL. */
async function copyPostgresDatabase (databaseUrl: string): Promise<string> {
  const url = new URL(databaseUrl)
  const original = url.pathname.slice(1)
  const copy = `${original}_copy`
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query(`CREATE DATABASE ${copy} TEMPLATE ${original}`)
  } finally {
    await client.end()
  }
  url.pathname = `/${copy}`
  return url.toString()
}

/**
 * Applies versions 8 and up to a copy of a version-7 database as connection.ts's `migrate` does (each SQL
 * version in a transaction, a backfill a batch per transaction, no statement timeout), timing each:
 * seconds by version.
 */
async function timePostgresMigrations (databaseUrl: string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  const inTransaction = async <T>(work: () => Promise<T>): Promise<T> => {
    await client.query('BEGIN')
    try {
      const result = await work()
      await client.query('COMMIT')
      return result
    } catch (error) {
      await client.query('ROLLBACK')
      throw error
    }
  }
  const times: Record<string, number> = {}
  try {
    for (const migration of postgresMigrations.filter((candidate) => candidate.version > 7)) {
      const started = performance.now()
      if ('sql' in migration) {
        await inTransaction(() => client.query(migration.sql))
      } else {
        while (await inTransaction(() => migration.backfillBatch(client as unknown as pg.PoolClient)) > 0);
      }
      await client.query('INSERT INTO plantstore_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name])
      times[migration.version] = Number(((performance.now() - started) / 1000).toFixed(2))
    }
  } finally {
    await client.end()
  }
  return times
}

/**
 * Upgrades of a store of release 1.7.0 with `size` plants by this build: the start that migrates it
 * (from the spawn to the service's "ready" line), a second start of the migrated store (what any
 * start costs), and each migration's time, from applying them again, the same way, to a copy of the
 * store made before the upgrade; on PostgreSQL also from plantstore_migrations.applied_at (each
 * version's transaction start) of the service's upgrade, and the background build of the trigram index
 * from the service's log.
 */
export async function measureUpgrades (harness: Harness, size: number) {
  const upgrades: Array<Record<string, unknown>> = []
  {
    const file = join(harness.workFolder, 'release-1.7.db')
    let started = performance.now()
    sqliteStoreOfRelease17(file, size)
    process.stderr.write(`query: a SQLite store of release 1.7.0 with ${size} plants made in ${seconds(started)} s\n`)
    copyFileSync(file, `${file}.copy`)
    const first = await timedStart(harness, 'sqlite-upgrade', `sqlite:${file}`)
    await harness.servers.stop(first.target)
    const again = await timedStart(harness, 'sqlite-upgraded', `sqlite:${file}`)
    await harness.servers.stop(again.target)
    started = performance.now()
    const byVersion = timeSqliteMigrations(`${file}.copy`)
    process.stderr.write(`query: SQLite migrations applied again to a copy in ${seconds(started)} s\n`)
    upgrades.push({ backend: 'sqlite', plants: size, upgradingStartSeconds: first.seconds, startSeconds: again.seconds, byVersion })
  }
  {
    const databaseUrl = await harness.postgresDatabase()
    const started = performance.now()
    await postgresStoreOfRelease17(databaseUrl, size)
    process.stderr.write(`query: a PostgreSQL store of release 1.7.0 with ${size} plants made in ${seconds(started)} s\n`)
    const copyUrl = await copyPostgresDatabase(databaseUrl)
    const spawned = Date.now()
    const first = await timedStart(harness, 'postgres-upgrade', databaseUrl)
    const built = await logLine(harness, first.target, 'plants_name_trigrams is built', UPGRADE_TIMEOUT_MS)
    const trigramSeconds = Number(/built \((\d+(?:\.\d+)?) s\)/.exec(built)?.[1] ?? NaN)
    await harness.servers.stop(first.target)
    const client = new pg.Client({ connectionString: databaseUrl })
    await client.connect()
    const { rows } = await client.query<{ version: number, at: string }>(
      'SELECT version, (extract(epoch FROM applied_at) * 1000)::bigint::text AS at FROM plantstore_migrations WHERE version >= 8 ORDER BY version')
    await client.end()
    const versions = rows.map((row) => ({ version: row.version, at: Number(row.at) }))
    if (versions.at(-1)?.version !== postgresMigrations.at(-1)?.version) throw new Error(`the upgrade stopped at version ${versions.at(-1)?.version}`)
    const readyAt = spawned + first.seconds * 1000
    // Each SQL version records itself in its own transaction, whose start applied_at is; a backfill records
    // itself after its last batch. So 8 and 9 run from 8's applied_at to 9's, and 10 from its own to the ready line.
    const appliedAt = (version: number) => versions.find((entry) => entry.version === version)?.at ?? NaN
    const byServiceStart: Record<string, number> = {
      '8–9': Number(((appliedAt(9) - appliedAt(8)) / 1000).toFixed(2)),
      10: Number(((readyAt - appliedAt(10)) / 1000).toFixed(2))
    }
    const again = await timedStart(harness, 'postgres-upgraded', databaseUrl)
    await harness.servers.stop(again.target)
    const copyStarted = performance.now()
    const byVersion = await timePostgresMigrations(copyUrl)
    process.stderr.write(`query: PostgreSQL migrations applied again to a copy in ${seconds(copyStarted)} s\n`)
    upgrades.push({
      backend: 'postgres', plants: size, upgradingStartSeconds: first.seconds, startSeconds: again.seconds, byVersion, byServiceStart, trigramIndexSeconds: trigramSeconds
    })
  }
  process.stdout.write(`\nupgrades of a store of release 1.7.0 (schema version 7) with ${size} plants by this build: seconds\n`)
  const versions = [...new Set(upgrades.flatMap((upgrade) => Object.keys(upgrade.byVersion as Record<string, number>)))]
  process.stdout.write(`${formatTable(['backend', 'start that upgrades', 'a start after', ...versions.map((version) => `migration ${version}`), 'trigram index (background)'],
    upgrades.map((upgrade) => [String(upgrade.backend), String(upgrade.upgradingStartSeconds), String(upgrade.startSeconds),
      ...versions.map((version) => String((upgrade.byVersion as Record<string, number>)[version] ?? '')),
      upgrade.trigramIndexSeconds === undefined ? '' : String(upgrade.trigramIndexSeconds)]), 1)}\n`)
  process.stdout.write('each migration timed again on a copy of the 1.7.0 store made before the upgrade (8 adds the column and, on PostgreSQL, a partial index; ' +
    '9 folds every name; 10 builds the name indexes, and on SQLite the trigram table); the PostgreSQL trigram index is built by the service after it is ready\n')
  const postgres = upgrades.find((upgrade) => upgrade.backend === 'postgres')
  if (postgres !== undefined) {
    process.stdout.write(`PostgreSQL, in the service's upgrading start, from plantstore_migrations.applied_at: ${JSON.stringify(postgres.byServiceStart)} ` +
      '(8 and 9 together: 8\'s transaction start to 9\'s record after its last batch; 10 from its start to the ready line)\n')
  }
  return upgrades
}
