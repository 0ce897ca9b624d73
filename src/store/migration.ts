/**
 * One version of a backend's schema. Most are SQL; a backfill is a step only this release's code can do
 * (a value computed in JavaScript for every row), run a batch at a time, each batch in a transaction
 * of its own, until a batch finds nothing left to do. `Connection` is what the backend runs it on, and
 * `Rows` how it answers: a number of rows (SQLite), or a promise of it (PostgreSQL).
 */
export type Migration<Connection = never, Rows = number> = SqlMigration | BackfillMigration<Connection, Rows>

export interface SqlMigration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export interface BackfillMigration<Connection, Rows> {
  readonly version: number
  readonly name: string
  /** Does one batch of the work and says how many rows it changed; 0 when none was left. */
  readonly backfillBatch: (connection: Connection) => Rows
}

export class SchemaTooNewError extends Error {
  constructor (found: number, known: number) {
    super(`the database schema is at version ${found}, newer than this plantstore knows (${known}); ` +
      'run a plantstore release at least as new as the one that last opened it')
    this.name = 'SchemaTooNewError'
  }
}

export function latestVersion (migrations: ReadonlyArray<{ readonly version: number }>): number {
  return migrations.at(-1)?.version ?? 0
}
