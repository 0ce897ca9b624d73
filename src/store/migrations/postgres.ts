import type { Migration } from './migration.js'

/**
 * The PostgreSQL schema, one entry per version. Applied in order at start, under an advisory lock;
 * never edit a released entry. Portable SQL only (no stored procedures), so PostgreSQL-compatible
 * distributed engines can run it too.
 */
export const postgresMigrations: readonly Migration[] = [
  {
    version: 1,
    name: 'plants and the generated access token',
    sql: `
      CREATE TABLE plants (
        id   BIGINT PRIMARY KEY,
        name TEXT NOT NULL,
        tag  TEXT
      );

      CREATE TABLE generated_access_token (
        singleton  SMALLINT PRIMARY KEY CHECK (singleton = 1),
        sha256     BYTEA NOT NULL CHECK (length(sha256) = 32),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
    `
  }
]
