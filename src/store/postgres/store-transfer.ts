import { postgresCopyTarget } from './copy-target.js'
import { openPostgresSnapshot } from './store-rows.js'
import { StoreTransferUnsupportedError, type StoreLocation, type StoreTransfer } from '../store-transfer.js'

/**
 * What moves a PostgreSQL store: both ends of a copy. Its backups are PostgreSQL's own (pg_dump and
 * pg_restore), which see the whole database and its roles, as plantstore cannot.
 */
export function postgresStoreTransfer (url: string): StoreTransfer {
  return {
    location: locatePostgres(url),
    file (command) {
      throw new StoreTransferUnsupportedError(command === 'backup'
        ? 'DATABASE_URL is a PostgreSQL store: back up PostgreSQL with pg_dump; see docs/guides/backups.md'
        : 'DATABASE_URL is a PostgreSQL store: restore PostgreSQL with pg_restore, or copy a SQLite backup into it with plantstore copy; see docs/guides/backups.md')
    },
    openCopySource: (options) => openPostgresSnapshot(url, options),
    copyTarget: (options) => postgresCopyTarget(url, options)
  }
}

function locatePostgres (url: string): StoreLocation {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new Error('a postgres:// URL that cannot be read: postgres://user:password@host:port/database')
  }
  const user = decodeURIComponent(parsed.username)
  const host = parsed.searchParams.get('host') ?? parsed.hostname
  const port = parsed.port === '' ? '5432' : parsed.port
  const database = decodeURIComponent(parsed.pathname.slice(1)) || user
  const secrets = [parsed.password, decodeURIComponent(parsed.password), parsed.searchParams.get('password') ?? ''].filter((secret) => secret !== '')
  return {
    shown: `postgres://${user === '' ? '' : `${user}@`}${host}:${port}/${database}`,
    identity: `postgres://${host}:${port}/${database}`,
    secrets
  }
}
