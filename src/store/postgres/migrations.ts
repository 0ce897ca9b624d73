import type pg from 'pg'
import type { Migration } from '../migration.js'
import { foldName } from '../plant-names.js'

/**
 * The PostgreSQL schema, one entry per version. Applied in order at start, under an advisory lock;
 * never edit a released entry. Portable SQL only (no stored procedures), so PostgreSQL-compatible
 * distributed engines can run it too.
 */
export const postgresMigrations: ReadonlyArray<Migration<pg.PoolClient, Promise<number>>> = [
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
        sha256     BYTEA NOT NULL UNIQUE CHECK (length(sha256) = 32),
        created_at TIMESTAMPTZ NOT NULL,
        expires_at TIMESTAMPTZ,
        revoked_at TIMESTAMPTZ
      );

      CREATE INDEX access_tokens_live_name ON access_tokens (name) WHERE revoked_at IS NULL;

      CREATE TABLE access_token_revision (
        singleton SMALLINT PRIMARY KEY CHECK (singleton = 1),
        revision  BIGINT NOT NULL
      );
      INSERT INTO access_token_revision (singleton, revision) VALUES (1, 0);

      INSERT INTO access_tokens (id, name, scopes, sha256, created_at)
        SELECT gen_random_uuid()::text, 'initial-admin', 'plants:read plants:write admin', sha256, created_at
        FROM generated_access_token;
      DROP TABLE generated_access_token;
    `
  },
  {
    version: 3,
    name: 'an index for the pages of one tag',
    // Building it holds off writes to plants for as long as it takes on a large table; an index built
    // beforehand with CREATE INDEX CONCURRENTLY under this name is kept (docs/guides/upgrading.md, "Large PostgreSQL tables").
    sql: 'CREATE INDEX IF NOT EXISTS plants_tag_id ON plants (tag, id);'
  },
  {
    version: 4,
    name: 'webhook subscriptions, their outbox and delivery attempts',
    // Times are milliseconds since the epoch, from the instances' clocks. An outbox row is one event for
    // one subscription, written in the transaction of the plant write that caused it, deleted once delivered.
    sql: `
      CREATE TABLE webhook_subscriptions (
        id              TEXT PRIMARY KEY,
        url             TEXT NOT NULL,
        events          TEXT NOT NULL,
        secret          TEXT NOT NULL,
        created_at      BIGINT NOT NULL,
        disabled_at     BIGINT,
        disabled_reason TEXT,
        delivered       BIGINT NOT NULL DEFAULT 0,
        failed          BIGINT NOT NULL DEFAULT 0,
        last_error      TEXT,
        last_error_at   BIGINT
      );

      CREATE TABLE webhook_outbox (
        id              BIGSERIAL PRIMARY KEY,
        subscription_id TEXT NOT NULL,
        event_id        TEXT NOT NULL,
        event_type      TEXT NOT NULL,
        plant_id        BIGINT NOT NULL,
        body            TEXT NOT NULL,
        created_at      BIGINT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at BIGINT NOT NULL,
        lease_until     BIGINT NOT NULL DEFAULT 0,
        lease_owner     TEXT,
        failed_at       BIGINT
      );
      CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at, id) WHERE failed_at IS NULL;
      CREATE INDEX webhook_outbox_plant ON webhook_outbox (subscription_id, plant_id, id) WHERE failed_at IS NULL;

      CREATE TABLE webhook_attempts (
        id              BIGSERIAL PRIMARY KEY,
        subscription_id TEXT NOT NULL,
        event_id        TEXT NOT NULL,
        event_type      TEXT NOT NULL,
        attempt         INTEGER NOT NULL,
        status_code     INTEGER,
        error           TEXT,
        at              BIGINT NOT NULL
      );
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
        singleton   SMALLINT PRIMARY KEY CHECK (singleton = 1),
        source      TEXT NOT NULL,
        started_at  BIGINT NOT NULL,
        finished_at BIGINT,
        copying     TEXT,
        after_key   TEXT,
        tally       TEXT NOT NULL
      );
    `
  },
  {
    version: 6,
    name: 'the previous signing secret of a webhook subscription, for the grace period of a rotation',
    // `POST /admin/webhooks/{id}/rotate-secret` keeps the secret it replaces here (sealed as the secret is)
    // until previous_secret_until (milliseconds since the epoch): until then deliveries carry both signatures.
    sql: `
      ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret TEXT;
      ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret_until BIGINT;
    `
  },
  {
    version: 7,
    name: 'an index of the due outbox rows of each webhook subscription',
    // A claim reads each subscription's oldest due rows through it, however long another subscription's
    // backlog. Building it holds off writes to the outbox for as long as it takes on a large one; an index
    // built beforehand with CREATE INDEX CONCURRENTLY under this name is kept (docs/guides/upgrading.md, "Large PostgreSQL tables").
    sql: 'CREATE INDEX IF NOT EXISTS webhook_outbox_subscription_due ON webhook_outbox (subscription_id, next_attempt_at, id) WHERE failed_at IS NULL;'
  },
  {
    version: 8,
    name: 'the folded name a search matches',
    // Written by every write from now on (plant-names.ts); the plants stored before it are folded by version 9.
    // The partial index finds what an instance of an earlier release writes while instances are upgraded one
    // by one: the newer ones fold it (search-index.ts).
    sql: `
      ALTER TABLE plants ADD COLUMN IF NOT EXISTS name_folded TEXT;
      CREATE INDEX IF NOT EXISTS plants_unfolded ON plants (id) WHERE name_folded IS NULL;
    `
  },
  {
    version: 9,
    name: 'the folded names of the plants stored before version 8',
    backfillBatch: foldStoredNames
  },
  {
    version: 10,
    name: 'indexes for pages in name order',
    // Names in the "C" collation: the order of their UTF-8 bytes, Unicode code points. Building them holds off
    // writes to plants for as long as it takes on a large table; indexes built beforehand with CREATE INDEX
    // CONCURRENTLY under these names are kept. The search index is not a migration (search-index.ts).
    sql: `
      CREATE INDEX IF NOT EXISTS plants_name_id ON plants (name COLLATE "C", id);
      CREATE INDEX IF NOT EXISTS plants_tag_name_id ON plants (tag, name COLLATE "C", id);
    `
  },
  {
    version: 11,
    name: 'the change log',
    // One row per change. A write transaction takes its changes' numbers from change_log_head as its last
    // statement and holds that row locked until it commits, so numbers are taken in commit order on every
    // instance and a reader never sees a change while one with a smaller seq can still commit (write-batch.ts).
    // type: 1 created, 2 updated, 3 deleted; name and tag are the plant after the change (no name: deleted);
    // left_tag its tag before, only where that differs. committed_at is milliseconds since the epoch, by the
    // server's clock, kept growing with seq by change_log_head.committed_at.
    // change_log_pruned is a row of its own so that pruning never waits for the head's lock.
    sql: `
      CREATE TABLE plant_changes (
        seq          BIGINT PRIMARY KEY,
        plant_id     BIGINT NOT NULL,
        type         SMALLINT NOT NULL,
        name         TEXT,
        tag          TEXT,
        left_tag     TEXT,
        committed_at BIGINT NOT NULL,
        made_by      TEXT NOT NULL
      );
      CREATE INDEX plant_changes_plant ON plant_changes (plant_id, seq);
      CREATE INDEX plant_changes_tag ON plant_changes (tag, seq) WHERE tag IS NOT NULL;
      CREATE INDEX plant_changes_left_tag ON plant_changes (left_tag, seq) WHERE left_tag IS NOT NULL;
      CREATE TABLE change_log_head (
        singleton    SMALLINT PRIMARY KEY CHECK (singleton = 1),
        head         BIGINT NOT NULL,
        committed_at BIGINT NOT NULL
      );
      INSERT INTO change_log_head (singleton, head, committed_at) VALUES (1, 0, 0);
      CREATE TABLE change_log_pruned (
        singleton SMALLINT PRIMARY KEY CHECK (singleton = 1),
        through   BIGINT NOT NULL
      );
      INSERT INTO change_log_pruned (singleton, through) VALUES (1, 0);
    `
  }
]

const FOLD_BATCH = 5000

/**
 * Folds the names of up to FOLD_BATCH plants that have no folded name yet, locking them so that a rename
 * by an instance of an earlier release waits; how many it folded.
 */
export async function foldStoredNames (client: pg.PoolClient): Promise<number> {
  const { rows } = await client.query<{ id: bigint, name: string }>(
    'SELECT id, name FROM plants WHERE name_folded IS NULL ORDER BY id LIMIT $1 FOR UPDATE', [FOLD_BATCH])
  if (rows.length === 0) return 0
  await client.query('UPDATE plants SET name_folded = folded.name FROM unnest($1::bigint[], $2::text[]) AS folded (id, name) ' +
    'WHERE plants.id = folded.id', [rows.map((row) => row.id.toString()), rows.map((row) => foldName(row.name))])
  return rows.length
}
