import { counted } from '../counted.js'
import { latestVersion, SchemaTooNewError } from '../store/migration.js'
import type { SqliteDatabase } from '../store/sqlite/driver.js'
import { sqliteMigrations } from '../store/sqlite/migrations.js'

/** What a SQLite plantstore store holds, counted for the line a backup or a restore ends with. */
export interface StoreContents {
  readonly plants: number
  /** Live, expired and revoked alike; a release 1.0.0 store has its one generated token. */
  readonly accessTokens: number
  readonly webhookSubscriptions: number
  /** Webhook events recorded and not yet delivered (nor given up on). */
  readonly pendingWebhookEvents: number
  readonly schemaVersion: number
}

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

/** `2 plants, 1 access token, 0 webhook subscriptions and 0 pending webhook events`. */
export function describeContents (contents: StoreContents): string {
  return `${counted(contents.plants, 'plant')}, ${counted(contents.accessTokens, 'access token')}, ` +
    `${counted(contents.webhookSubscriptions, 'webhook subscription')} and ${counted(contents.pendingWebhookEvents, 'pending webhook event')}`
}
