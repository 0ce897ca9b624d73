export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export class SchemaTooNewError extends Error {
  constructor (found: number, known: number) {
    super(`the database schema is at version ${found}, newer than this plantstore knows (${known}); ` +
      'run a plantstore release at least as new as the one that last opened it')
    this.name = 'SchemaTooNewError'
  }
}

export function latestVersion (migrations: readonly Migration[]): number {
  return migrations.at(-1)?.version ?? 0
}
