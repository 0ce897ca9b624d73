import type { Migration } from './migration.js'

/** The SQLite schema, one entry per version. Applied in order at open; never edit a released entry. */
export const sqliteMigrations: readonly Migration[] = [
  {
    version: 1,
    name: 'plants and the generated access token',
    sql: `
      CREATE TABLE plants (
        id   INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        tag  TEXT
      ) STRICT;

      CREATE TABLE generated_access_token (
        singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
        sha256     BLOB NOT NULL CHECK (length(sha256) = 32),
        created_at TEXT NOT NULL
      ) STRICT;
    `
  }
]
