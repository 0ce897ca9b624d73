/** The SQL of a migration a test applies by hand to build an older store; a backfill has none. */
export function sqlOf (migration: { readonly version: number } | undefined): string {
  if (migration === undefined || !('sql' in migration) || typeof migration.sql !== 'string') {
    throw new Error(`migration ${migration?.version} is not SQL`)
  }
  return migration.sql
}
