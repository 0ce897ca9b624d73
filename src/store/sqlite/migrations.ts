import type { SqliteDatabase } from './driver.js'
import type { Migration } from '../migration.js'
import { foldName } from '../plant-names.js'

/** The SQLite schema, one entry per version. Applied in order at open; never edit a released entry. */
export const sqliteMigrations: ReadonlyArray<Migration<SqliteDatabase>> = [
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
    // in the table, which made it cost about half as much again as an unfiltered page (bench/results/2026-11-23-1510-issue-12-updates.md).
    sql: 'CREATE INDEX plants_tag_id ON plants (tag, id, name);'
  },
  {
    version: 4,
    name: 'webhook subscriptions, their outbox and delivery attempts',
    // Times are milliseconds since the epoch. An outbox row is one event for one subscription, written in
    // the transaction of the plant write that caused it, and deleted once delivered.
    sql: `
      CREATE TABLE webhook_subscriptions (
        id              TEXT PRIMARY KEY,
        url             TEXT NOT NULL,
        events          TEXT NOT NULL,
        secret          TEXT NOT NULL,
        created_at      INTEGER NOT NULL,
        disabled_at     INTEGER,
        disabled_reason TEXT,
        delivered       INTEGER NOT NULL DEFAULT 0,
        failed          INTEGER NOT NULL DEFAULT 0,
        last_error      TEXT,
        last_error_at   INTEGER
      ) STRICT;

      CREATE TABLE webhook_outbox (
        id              INTEGER PRIMARY KEY,
        subscription_id TEXT NOT NULL,
        event_id        TEXT NOT NULL,
        event_type      TEXT NOT NULL,
        plant_id        INTEGER NOT NULL,
        body            TEXT NOT NULL,
        created_at      INTEGER NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        lease_until     INTEGER NOT NULL DEFAULT 0,
        lease_owner     TEXT,
        failed_at       INTEGER
      ) STRICT;
      CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at, id) WHERE failed_at IS NULL;
      CREATE INDEX webhook_outbox_plant ON webhook_outbox (subscription_id, plant_id, id) WHERE failed_at IS NULL;

      CREATE TABLE webhook_attempts (
        id              INTEGER PRIMARY KEY,
        subscription_id TEXT NOT NULL,
        event_id        TEXT NOT NULL,
        event_type      TEXT NOT NULL,
        attempt         INTEGER NOT NULL,
        status_code     INTEGER,
        error           TEXT,
        at              INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX webhook_attempts_subscription ON webhook_attempts (subscription_id, id);
    `
  },
  {
    version: 5,
    name: 'the record of a store copied into this one',
    // One row, written by `plantstore copy` in the transaction of each batch it copies: which store it
    // copies (never a password), which table it is at and the last key of it copied, so that the same
    // command run again after an interruption goes on from there. Times are milliseconds since the epoch.
    sql: `
      CREATE TABLE store_copy (
        singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
        source      TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        finished_at INTEGER,
        copying     TEXT,
        after_key   TEXT,
        tally       TEXT NOT NULL
      ) STRICT;
    `
  },
  {
    version: 6,
    name: 'the previous signing secret of a webhook subscription, for the grace period of a rotation',
    // `POST /admin/webhooks/{id}/rotate-secret` keeps the secret it replaces here (sealed as the secret is)
    // until previous_secret_until (milliseconds since the epoch): until then deliveries carry both signatures.
    sql: `
      ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret TEXT;
      ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret_until INTEGER;
    `
  },
  {
    version: 7,
    name: 'an index of the due outbox rows of each webhook subscription',
    // A claim reads each subscription's oldest due rows through it, however long another subscription's backlog.
    sql: 'CREATE INDEX webhook_outbox_subscription_due ON webhook_outbox (subscription_id, next_attempt_at, id) WHERE failed_at IS NULL;'
  },
  {
    version: 8,
    name: 'the folded name a search matches',
    // Written by every write from now on (plant-names.ts); the plants stored before it are folded by version 9,
    // found through the partial index, which version 10 drops.
    sql: `
      ALTER TABLE plants ADD COLUMN name_folded TEXT;
      CREATE INDEX plants_unfolded ON plants (id) WHERE name_folded IS NULL;
    `
  },
  {
    version: 9,
    name: 'the folded names of the plants stored before version 8',
    backfillBatch: foldStoredNames
  },
  {
    version: 10,
    name: 'indexes for pages in name order and for searches',
    // Names in the BINARY collation, the order of their UTF-8 bytes: Unicode code points. The search index is
    // FTS5's trigram tokenizer over the folded names, whose text the plants table holds ('external content');
    // case_sensitive 1, since the names are folded already. Writes do not index: triggers note each changed
    // id in plant_search_pending, with the text the index holds for it, and the writer indexes them in bulk
    // (search-index.ts), at a third of the cost; a search reads the pending plants' names meanwhile.
    sql: `
      DROP INDEX plants_unfolded;
      CREATE INDEX plants_name_id ON plants (name, id);
      CREATE INDEX plants_tag_name_id ON plants (tag, name, id);
      CREATE VIRTUAL TABLE plant_name_search USING fts5(
        name_folded, content = 'plants', content_rowid = 'id', tokenize = 'trigram case_sensitive 1', detail = full
      );
      INSERT INTO plant_name_search (plant_name_search) VALUES ('rebuild');
      CREATE TABLE plant_search_pending (
        id      INTEGER PRIMARY KEY,
        indexed TEXT
      ) STRICT;
      CREATE TRIGGER plant_search_pending_insert AFTER INSERT ON plants BEGIN
        INSERT OR IGNORE INTO plant_search_pending (id, indexed) VALUES (new.id, NULL);
      END;
      CREATE TRIGGER plant_search_pending_update AFTER UPDATE OF name_folded ON plants BEGIN
        INSERT OR IGNORE INTO plant_search_pending (id, indexed) VALUES (old.id, old.name_folded);
      END;
      CREATE TRIGGER plant_search_pending_delete AFTER DELETE ON plants BEGIN
        INSERT OR IGNORE INTO plant_search_pending (id, indexed) VALUES (old.id, old.name_folded);
      END;
    `
  },
  {
    version: 11,
    name: 'the change log',
    // One row per change, numbered by seq in commit order: the writer gives each transaction's changes the
    // numbers after change_log.head (one writer at a time holds the database, so this is commit order) and
    // moves the head, which pruning never lowers. type: 1 created, 2 updated, 3 deleted; name and tag are
    // the plant after the change (no name: deleted); left_tag its tag before, only where that differs, so
    // that a tag's changes, the plants that left it included, are read from two partial indexes.
    // committed_at is milliseconds since the epoch, never below the previous transaction's (change_log.committed_at).
    // document: the change as the feed answers it, the bytes of changeJson (change-document.ts), built by
    // SQLite as each row is written, so that a feed page is read as a list page is, one column.
    // pruned_through: every seq up to it is gone.
    sql: `
      CREATE TABLE plant_changes (
        seq          INTEGER PRIMARY KEY,
        plant_id     INTEGER NOT NULL,
        type         INTEGER NOT NULL,
        name         TEXT,
        tag          TEXT,
        left_tag     TEXT,
        committed_at INTEGER NOT NULL,
        made_by      TEXT NOT NULL,
        document     TEXT NOT NULL GENERATED ALWAYS AS (
          '{"seq":' || seq ||
          ',"type":"' || CASE type WHEN 1 THEN 'plant.created' WHEN 2 THEN 'plant.updated' ELSE 'plant.deleted' END ||
          '","id":' || plant_id ||
          CASE WHEN name IS NULL THEN '' ELSE
            ',"plant":{"id":' || plant_id || ',"name":' || json_quote(name) ||
            CASE WHEN tag IS NULL THEN '' ELSE ',"tag":' || json_quote(tag) END || '}'
          END ||
          ',"at":"' || strftime('%Y-%m-%dT%H:%M:%S', committed_at / 1000, 'unixepoch') ||
          '.' || substr('00' || (committed_at % 1000), -3) || 'Z"}'
        ) STORED
      ) STRICT;
      CREATE INDEX plant_changes_plant ON plant_changes (plant_id, seq);
      CREATE INDEX plant_changes_tag ON plant_changes (tag, seq) WHERE tag IS NOT NULL;
      CREATE INDEX plant_changes_left_tag ON plant_changes (left_tag, seq) WHERE left_tag IS NOT NULL;
      CREATE TABLE change_log (
        singleton      INTEGER PRIMARY KEY CHECK (singleton = 1),
        head           INTEGER NOT NULL,
        pruned_through INTEGER NOT NULL,
        committed_at   INTEGER NOT NULL
      ) STRICT;
      INSERT INTO change_log (singleton, head, pruned_through, committed_at) VALUES (1, 0, 0, 0);
    `
  }
]

const FOLD_BATCH = 5000

/** Folds the names of up to FOLD_BATCH plants that have no folded name yet; how many it folded. */
function foldStoredNames (db: SqliteDatabase): number {
  // Ids as `bigint` whatever the connection's default: a double would miss the row of an id above 2^53.
  const plants = db.prepare<[number], { id: bigint, name: string }>(
    'SELECT id, name FROM plants WHERE name_folded IS NULL ORDER BY id LIMIT ?').safeIntegers(true).all(FOLD_BATCH)
  const fold = db.prepare<[string, bigint]>('UPDATE plants SET name_folded = ? WHERE id = ?')
  let folded = 0
  for (const { id, name } of plants) folded += fold.run(foldName(name), id).changes
  if (folded !== plants.length) throw new Error(`folding stored names: ${plants.length - folded} of ${plants.length} plants were not found again`)
  return folded
}
