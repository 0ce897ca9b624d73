import { isPostgresUrl, sqliteFilePath } from '../store/open-store.js'

/**
 * The file of the SQLite store `databaseUrl` names, for `plantstore backup` and `restore`, which work
 * on SQLite files only; throws, saying what to use instead, for a memory or PostgreSQL store.
 */
export function sqliteStorePathFor (command: 'backup' | 'restore', databaseUrl: string): string {
  if (databaseUrl.startsWith('sqlite:')) return sqliteFilePath(databaseUrl)
  if (databaseUrl === 'memory:') {
    throw new Error(command === 'backup'
      ? 'DATABASE_URL is "memory:": a memory store lives only inside its service, with no file to back up; export its plants with GET /admin/export'
      : 'DATABASE_URL is "memory:": restore writes a SQLite store; set DATABASE_URL to sqlite:PATH')
  }
  if (isPostgresUrl(databaseUrl)) {
    throw new Error(command === 'backup'
      ? 'DATABASE_URL is a PostgreSQL store: back up PostgreSQL with pg_dump; see docs/guides/backups.md'
      : 'DATABASE_URL is a PostgreSQL store: restore PostgreSQL with pg_restore, or copy a SQLite backup into it with plantstore copy; see docs/guides/backups.md')
  }
  throw new Error(`DATABASE_URL must be a sqlite: URL for ${command}, got one starting ${JSON.stringify(databaseUrl.split(':')[0])}`)
}
