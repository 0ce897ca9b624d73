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
  },
  {
    version: 2,
    name: 'access tokens as data: names, scopes, expiry, revocation',
    // The generated token of an earlier release becomes the first-start admin token, all scopes, same digest.
    sql: `
      CREATE TABLE access_tokens (
        id         TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        scopes     TEXT NOT NULL,
        sha256     BLOB NOT NULL UNIQUE CHECK (length(sha256) = 32),
        created_at TEXT NOT NULL,
        expires_at TEXT,
        revoked_at TEXT
      ) STRICT;

      CREATE INDEX access_tokens_live_name ON access_tokens (name) WHERE revoked_at IS NULL;

      CREATE TABLE access_token_revision (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        revision  INTEGER NOT NULL
      ) STRICT;
      INSERT INTO access_token_revision (singleton, revision) VALUES (1, 0);

      INSERT INTO access_tokens (id, name, scopes, sha256, created_at)
        SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
                     substr('89ab', 1 + abs(random()) % 4, 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
               'initial-admin', 'plants:read plants:write admin', sha256, created_at
        FROM generated_access_token;
      DROP TABLE generated_access_token;
    `
  },
  {
    version: 3,
    name: 'an index for the pages of one tag',
    // Covering: a tag's page is read from the index alone, in id order, without a lookup of each row
    // in the table, which made it cost about half as much again as an unfiltered page (docs/benchmarks.md).
    sql: 'CREATE INDEX plants_tag_id ON plants (tag, id, name);'
  }
]
