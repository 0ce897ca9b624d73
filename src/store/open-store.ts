import type { PlantStore } from './plant-store.js'
import type { PostgresOptions } from './postgres/store.js'
import type { StoreTransfer } from './store-transfer.js'

/**
 * Opens the store a `DATABASE_URL` names. The scheme picks the adapter; each adapter's driver is
 * imported only when that backend is chosen.
 */
export async function openStore (databaseUrl: string, databaseOptions: PostgresOptions): Promise<PlantStore> {
  if (databaseUrl === 'memory:') {
    const { openMemoryStore } = await import('./memory/store.js')
    return openMemoryStore()
  }
  if (databaseUrl.startsWith('sqlite:')) {
    const { openSqliteStore } = await import('./sqlite/store.js')
    return openSqliteStore(sqliteFilePath(databaseUrl), { statementTimeoutMs: databaseOptions.statementTimeoutMs })
  }
  if (isPostgresUrl(databaseUrl)) {
    const { openPostgresStore } = await import('./postgres/store.js')
    return openPostgresStore(databaseUrl, databaseOptions)
  }
  throw new Error(`unsupported DATABASE_URL scheme in ${JSON.stringify(databaseUrl.split(':')[0])}`)
}

/**
 * Opens what moves the store a URL names, beside its service (store-transfer.ts): backup, restore and
 * the ends of a copy. Nothing is connected to until an operation is run; the scheme picks the backend,
 * whose driver is imported only then. A memory store lives only inside its service: it has none.
 */
export async function openStoreTransfer (databaseUrl: string): Promise<StoreTransfer> {
  if (databaseUrl.startsWith('sqlite:')) {
    const file = sqliteFilePath(databaseUrl)
    if (file === '') throw new Error(`${JSON.stringify(databaseUrl)} names no file: give sqlite:PATH`)
    const { sqliteStoreTransfer } = await import('./sqlite/store-transfer.js')
    return sqliteStoreTransfer(file)
  }
  if (isPostgresUrl(databaseUrl)) {
    const { postgresStoreTransfer } = await import('./postgres/store-transfer.js')
    return postgresStoreTransfer(databaseUrl)
  }
  if (databaseUrl === 'memory:') throw new Error('"memory:": a memory store lives only inside its service; nothing beside it can reach its data')
  throw new Error(`unsupported DATABASE_URL scheme in ${JSON.stringify(databaseUrl.split(':')[0])}`)
}

/** `sqlite:./data/plantstore.db` → `./data/plantstore.db`; `sqlite:///var/x.db` → `/var/x.db`. */
export function sqliteFilePath (databaseUrl: string): string {
  const rest = databaseUrl.slice('sqlite:'.length)
  return rest.startsWith('//') ? rest.slice(2) : rest
}

export function isPostgresUrl (databaseUrl: string): boolean {
  return databaseUrl.startsWith('postgres://') || databaseUrl.startsWith('postgresql://')
}
