import type { PlantStore } from './plant-store.js'
import type { PostgresOptions } from './postgres/store.js'

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

/** `sqlite:./data/plantstore.db` → `./data/plantstore.db`; `sqlite:///var/x.db` → `/var/x.db`. */
export function sqliteFilePath (databaseUrl: string): string {
  const rest = databaseUrl.slice('sqlite:'.length)
  return rest.startsWith('//') ? rest.slice(2) : rest
}

export function isPostgresUrl (databaseUrl: string): boolean {
  return databaseUrl.startsWith('postgres://') || databaseUrl.startsWith('postgresql://')
}
