import type { SqliteDatabase } from './driver.js'
import { sqliteMigrations } from './migrations.js'
import { latestVersion, SchemaTooNewError } from '../migration.js'
import type { StoreContents } from '../store-transfer.js'

/**
 * Why the open database is not a plantstore store this release can use, or undefined when it is one.
 * A schema newer than this release's is SchemaTooNewError's message, the words a start would use.
 */
export function storeProblem (db: SqliteDatabase): string | undefined {
  const version = schemaVersion(db)
  if (!hasTable(db, 'plants')) return 'it is a SQLite database but not a plantstore store (it has no plants table)'
  if (version < 1) return 'it is a SQLite database but not a plantstore store (its schema version is 0)'
  const known = latestVersion(sqliteMigrations)
  if (version > known) return new SchemaTooNewError(version, known).message
  return undefined
}

export function schemaVersion (db: SqliteDatabase): number {
  return Number(db.pragma('user_version', { simple: true }))
}

/** Counts what the store holds; the tables a schema version lacks count as none. */
export function contentsOf (db: SqliteDatabase): StoreContents {
  const count = (table: string, where = ''): number =>
    hasTable(db, table) ? Number(db.prepare(`SELECT count(*) FROM ${table} ${where}`).pluck().get()) : 0
  return {
    plants: count('plants'),
    accessTokens: count('access_tokens') + count('generated_access_token'),
    webhookSubscriptions: count('webhook_subscriptions'),
    pendingWebhookEvents: count('webhook_outbox', 'WHERE failed_at IS NULL'),
    schemaVersion: schemaVersion(db)
  }
}

function hasTable (db: SqliteDatabase, name: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").get(name) !== undefined
}
