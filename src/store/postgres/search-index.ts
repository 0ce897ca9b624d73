import pg from 'pg'
import { ADVISORY_LOCK_KEYS } from './advisory-locks.js'
import type { PostgresConnection } from './connection.js'
import { foldStoredNames } from './migrations.js'

/** What the store says about its upkeep, to the service's log. */
export interface StoreLog {
  info (message: string): void
  warn (message: string): void
}

/** How often an instance folds the names that instances of an earlier release stored meanwhile. */
const SWEEP_MS = 60_000

export const SEARCH_INDEX_STATEMENTS = [
  'CREATE EXTENSION IF NOT EXISTS pg_trgm;',
  'CREATE INDEX CONCURRENTLY IF NOT EXISTS plants_name_trigrams ON plants USING gin (name_folded gin_trgm_ops);'
] as const

/**
 * The upkeep of searches on PostgreSQL, off the start's path:
 * - the trigram index (pg_trgm's GIN operator class over the folded names) that serves a search of
 *   three characters or more. It is no migration: a role may lack the right to create the extension (a
 *   managed PostgreSQL). Without it every search still answers, reading every name within the statement
 *   timeout, and the log says once what was lost and the statements an administrator runs. With it, the
 *   index is built CONCURRENTLY, writes going on meanwhile, by one instance at a time. Behind a pooler in
 *   transaction mode nothing is built (a build needs a session of its own): the log names the statements.
 * - the folding of names an instance of an earlier release stores while instances are upgraded one by
 *   one (the partial index plants_unfolded finds them), once a minute.
 */
export class SearchUpkeep {
  #sweep: NodeJS.Timeout | undefined
  #building: Promise<void> | undefined
  #client: pg.Client | undefined

  constructor (
    private readonly connectionString: string,
    private readonly connection: PostgresConnection,
    private readonly log: StoreLog,
    private readonly canBuild: boolean
  ) {}

  start (): void {
    this.#building = this.ensureIndex().catch((error: unknown) => {
      this.log.warn(`the search index was not built (${(error as Error).message}); searches read every name until a start builds it`)
    })
    this.#sweep = setInterval(() => { this.foldUnfolded().catch(() => {}) }, SWEEP_MS).unref()
  }

  /** Ends a build under way (the next start builds the index again) and the sweep. */
  async close (): Promise<void> {
    clearInterval(this.#sweep)
    await this.#client?.end().catch(() => {})
    await this.#building
  }

  /** Folds what an earlier release stored unfolded, a batch per transaction. */
  async foldUnfolded (): Promise<number> {
    let folded = 0
    for (;;) {
      const batch = await this.connection.transaction(foldStoredNames)
      folded += batch
      if (batch === 0) return folded
    }
  }

  private async ensureIndex (): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, application_name: 'plantstore-search-index' })
    client.on('error', () => {})
    this.#client = client
    await client.connect()
    try {
      if (!await this.hasExtension(client)) {
        if (!this.canBuild) return this.advise('the extension pg_trgm is not installed')
        try {
          await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm')
        } catch (error) {
          return this.advise(`this role cannot create the extension pg_trgm (${(error as Error).message})`)
        }
      }
      const state = await indexState(client)
      if (state === 'valid') return
      if (!this.canBuild) return this.advise('the index plants_name_trigrams does not exist')
      const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [ADVISORY_LOCK_KEYS.searchIndexBuild])
      // Another instance builds it.
      if (rows[0]?.locked !== true) return
      // A build that was cut short leaves an invalid index behind: it is built again.
      if (await indexState(client) === 'invalid') await client.query('DROP INDEX CONCURRENTLY IF EXISTS plants_name_trigrams')
      if (await indexState(client) === 'valid') return
      const started = performance.now()
      this.log.info('building the search index plants_name_trigrams; searches read every name until it is built')
      await client.query('SET statement_timeout = 0')
      await client.query(SEARCH_INDEX_STATEMENTS[1])
      this.log.info(`the search index plants_name_trigrams is built (${((performance.now() - started) / 1000).toFixed(1)} s)`)
    } finally {
      this.#client = undefined
      await client.end().catch(() => {})
    }
  }

  private async hasExtension (client: pg.Client): Promise<boolean> {
    const { rows } = await client.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
    return rows.length > 0
  }

  private advise (reason: string): void {
    this.log.warn(`searches read every name, within DATABASE_STATEMENT_TIMEOUT_MS, because ${reason}; to serve them from ` +
      `a trigram index an administrator runs, on this database: ${SEARCH_INDEX_STATEMENTS.join(' ')}`)
  }
}

async function indexState (client: pg.Client): Promise<'valid' | 'invalid' | 'absent'> {
  const { rows } = await client.query<{ valid: boolean }>(
    "SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'plants_name_trigrams'")
  const [row] = rows
  return row === undefined ? 'absent' : row.valid ? 'valid' : 'invalid'
}
