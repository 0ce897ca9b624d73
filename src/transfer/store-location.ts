import { existsSync, realpathSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { isPostgresUrl, sqliteFilePath } from '../store/open-store.js'
import { postgresCopyTarget } from '../store/postgres/copy-target.js'
import { openPostgresSnapshot, type PostgresCopyOptions } from '../store/postgres/store-rows.js'
import { sqliteCopyTarget } from '../store/sqlite/copy-target.js'
import { openSqliteSnapshot } from '../store/sqlite/store-rows.js'
import type { CopyTarget, StoreSnapshot } from '../store/store-copy.js'

/** A store named by a `sqlite:` or `postgres://` URL, as a copy reaches it and names it. */
export interface StoreLocation {
  readonly url: string
  /** How messages name the store: its URL without a password. */
  readonly shown: string
  /**
   * What tells this store from every other, in a copy's marker and to refuse copying a store into itself:
   * `sqlite:<real path>`, or `postgres://host:port/database`.
   */
  readonly identity: string
  /** The URL's password, if it holds one, so that no message can show it. */
  readonly secrets: readonly string[]
  readonly sqliteFile?: string
}

export function locateStore (url: string): StoreLocation {
  if (isPostgresUrl(url)) return locatePostgres(url)
  const file = sqliteFilePath(url)
  if (file === '') throw new Error(`${JSON.stringify(url)} names no file: give sqlite:PATH`)
  return { url, shown: `sqlite:${file}`, identity: `sqlite:${realPath(file)}`, secrets: [], sqliteFile: file }
}

/** The store's snapshot; a SQLite file that does not exist is refused, never created. */
export async function openSnapshot (location: StoreLocation, options: PostgresCopyOptions): Promise<StoreSnapshot> {
  if (location.sqliteFile === undefined) return openPostgresSnapshot(location.url, options)
  if (!existsSync(location.sqliteFile)) throw new Error('no such file: give the path of an existing store (nothing was created)')
  return openSqliteSnapshot(location.sqliteFile)
}

export function openTarget (location: StoreLocation, options: PostgresCopyOptions): CopyTarget {
  return location.sqliteFile === undefined ? postgresCopyTarget(location.url, options) : sqliteCopyTarget(location.sqliteFile)
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
    url,
    shown: `postgres://${user === '' ? '' : `${user}@`}${host}:${port}/${database}`,
    identity: `postgres://${host}:${port}/${database}`,
    secrets
  }
}

/** The file's real path, or for one not made yet its real folder's path joined with its name. */
function realPath (file: string): string {
  try {
    return realpathSync(file)
  } catch {
    try {
      return join(realpathSync(dirname(file)), basename(file))
    } catch {
      return resolve(file)
    }
  }
}
