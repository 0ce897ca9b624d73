import type pg from 'pg'
import { GroupCommit, RUN_AGAIN } from '../group-commit.js'
import {
  decideChange, idOf, type ChangeOperation, type CreateOperation, type PlanOperation, type WriteOperation, type WriteOutcome
} from '../write-operations.js'
import { deletedPlantBody, newEventId, type WebhookEventType } from '../webhook-store.js'
import { changeTypeCode, leftTagOf, UNNAMED_WRITER, type PendingChange } from '../change-log.js'
import { plantJson } from '../plant-document.js'
import { foldName } from '../plant-names.js'
import { outcomeOfMeeting, recordOfRow, samePlant, sameState, StoreUnavailableError, type PlantRecord, type PlantRow } from '../plant-store.js'
import type { PostgresConnection } from './connection.js'
import { mustDropConnection } from './transactions.js'

// One round trip for all of a batch's creates, one for the stored rows they met; for its changes, one
// that locks their rows, then one per kind of write they make. Ids are sorted so concurrent batches of
// several instances lock rows in one order.
/**
 * Whether any subscription is enabled, as the statement sees it: evaluated once per statement (an
 * InitPlan). The batch statements that return the rows a batch changes carry it, so a batch learns
 * whether its events need the outbox statement without a round trip of its own.
 */
const SUBSCRIBED = '(SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE disabled_at IS NULL)) AS subscribed'
const INSERT_PLANTS = {
  name: 'plantstore-insert-plants',
  text: `INSERT INTO plants (id, name, tag, name_folded)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) ORDER BY 1
         ON CONFLICT (id) DO NOTHING RETURNING id, ${SUBSCRIBED}`
}
const SELECT_PLANTS = { name: 'plantstore-select-plants', text: 'SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])' }
const LOCK_PLANTS = {
  name: 'plantstore-lock-plants',
  text: `SELECT id, name, tag, ${SUBSCRIBED} FROM plants WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE OF plants`
}
const UPDATE_PLANTS = {
  name: 'plantstore-update-plants',
  text: `UPDATE plants SET name = changed.name, tag = changed.tag, name_folded = changed.name_folded
         FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS changed (id, name, tag, name_folded)
         WHERE plants.id = changed.id`
}
const DELETE_PLANTS = { name: 'plantstore-delete-plants', text: 'DELETE FROM plants WHERE id = ANY($1::bigint[])' }
const INSERT_OUTBOX = {
  name: 'plantstore-insert-outbox',
  text: `INSERT INTO webhook_outbox (subscription_id, event_id, event_type, plant_id, body, created_at, next_attempt_at)
         SELECT s.id, e.event_id, e.event_type, e.plant_id, e.body, $5, $5
         FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) WITH ORDINALITY AS e (event_id, event_type, plant_id, body, n)
         JOIN webhook_subscriptions s ON s.disabled_at IS NULL AND position(' ' || e.event_type || ' ' in ' ' || s.events || ' ') > 0
         ORDER BY e.n, s.id`
}
/** The channel of RECORD_CHANGES's NOTIFY; its payload is the new head. */
export const CHANGES_CHANNEL = 'plantstore_changes'
/**
 * The batch's changes, numbered after the head, which the statement moves and keeps locked until the
 * transaction ends: so changes are numbered in commit order across every instance (no reader can see a
 * number while a smaller one may still commit), with no number skipped. The commit time is the database
 * server's clock once the lock is held, never below the previous one's: `at` grows with `seq` whatever the
 * instances' clocks. It runs last, to hold the lock
 * for the commit's round trip and no more, and its NOTIFY wakes the change streams of every instance.
 */
const RECORD_CHANGES = {
  name: 'plantstore-record-changes',
  text: `WITH head AS (
           UPDATE change_log_head SET head = head + $1,
             committed_at = greatest(committed_at, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
           WHERE singleton = 1 RETURNING head, committed_at),
         recorded AS (
           INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by)
           SELECT head.head - $1 + c.n, c.plant_id, c.type, c.name, c.tag, c.left_tag, head.committed_at, c.made_by
           FROM head, unnest($2::bigint[], $3::smallint[], $4::text[], $5::text[], $6::text[], $7::text[])
             WITH ORDINALITY AS c (plant_id, type, name, tag, left_tag, made_by, n))
         SELECT pg_notify('${CHANGES_CHANNEL}', head::text) FROM head`
}
/**
 * A batch of creates only (the common POST) in one statement: the plants whose ids are free, then, as
 * RECORD_CHANGES does, their changes numbered after the head, which it moves and keeps locked (only when a
 * plant was inserted), in the order the creates came. A round trip fewer than the two statements; the head
 * is then held from this statement on, through the outbox's when a subscription wants the events.
 */
const INSERT_PLANTS_RECORDING_CHANGES = {
  name: 'plantstore-insert-plants-recording-changes',
  text: `WITH created AS (
           SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[])
             WITH ORDINALITY AS c (id, name, tag, name_folded, made_by, n)),
         inserted AS (
           INSERT INTO plants (id, name, tag, name_folded) SELECT id, name, tag, name_folded FROM created ORDER BY id
           ON CONFLICT (id) DO NOTHING RETURNING id),
         numbered AS (
           SELECT created.*, row_number() OVER (ORDER BY created.n) AS k FROM created JOIN inserted USING (id)),
         head AS (
           UPDATE change_log_head SET head = head + (SELECT count(*) FROM inserted),
             committed_at = greatest(committed_at, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
           WHERE singleton = 1 AND EXISTS (SELECT 1 FROM inserted)
           RETURNING head, committed_at, (SELECT count(*) FROM inserted) AS added, pg_notify('${CHANGES_CHANNEL}', head::text)),
         recorded AS (
           INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by)
           SELECT head.head - head.added + numbered.k, numbered.id, 1, numbered.name, numbered.tag, NULL, head.committed_at, numbered.made_by
           FROM head, numbered)
         SELECT id, ${SUBSCRIBED} FROM inserted`
}
const MAX_BATCH_SIZE = 500

type BatchResults = Map<WriteOperation, WriteOutcome | typeof RUN_AGAIN>

/**
 * The plant writes, group-committed: the creates and changes that arrive while a batch commits go
 * together in the next transaction, and every caller is answered only after COMMIT returned (with the
 * server's default synchronous_commit, the WAL is flushed).
 */
export function postgresGroupCommit (connection: PostgresConnection, onBatchCommitted: ((size: number) => void) | undefined): GroupCommit {
  return new GroupCommit(
    (operations) => connection.retriedTransaction('write batch', (client) => writeBatch(client, operations)),
    { backend: 'postgres', maxBatchSize: MAX_BATCH_SIZE, onBatchCommitted, isOutage })
}

/** A batch that failed because its connection timed out or failed: the writes queued behind it would meet the same. */
function isOutage (error: unknown): boolean {
  return error instanceof StoreUnavailableError && mustDropConnection(error.cause)
}

/**
 * Runs one batch (its ids repeat only among creates; see GroupCommit) and works out each operation's
 * result. It first locks the rows its changes name (in id order) and decides them (decideChange), then
 * writes every new row, its creates' and its changes', in one id-ordered INSERT, then updates and
 * deletes rows it holds locked. After the first statement a batch waits only for other transactions'
 * uncommitted inserts, met in id order, so the batches of several instances cannot deadlock.
 */
async function writeBatch (client: pg.PoolClient, operations: readonly WriteOperation[]): Promise<Array<WriteOutcome | typeof RUN_AGAIN>> {
  const creates: CreateOperation[] = []
  const changes: ChangeOperation[] = []
  const plans: PlanOperation[] = []
  for (const operation of operations) {
    if (operation.kind === 'create') creates.push(operation)
    else if (operation.kind === 'plan') plans.push(operation)
    else changes.push(operation)
  }
  const results: BatchResults = new Map()
  const decided = await lockAndDecide(client, changes, plans, results)
  const firstCreateById = new Map<bigint, PlantRecord>()
  const createdBy = new Map<bigint, string>()
  for (const { plant, by } of creates) {
    if (firstCreateById.has(plant.id)) continue
    firstCreateById.set(plant.id, plant)
    createdBy.set(plant.id, by ?? UNNAMED_WRITER)
  }
  const newRows = [...firstCreateById.values(), ...decided.toInsert]
  const createsOnly = changes.length === 0 && plans.length === 0
  const { inserted, subscribed } = newRows.length === 0
    ? { inserted: new Set<bigint>(), subscribed: false }
    : createsOnly ? await insertPlantsRecordingChanges(client, newRows, createdBy) : await insertPlants(client, newRows)
  // A change that meant to create a row a concurrent transaction inserted first settles in a later batch.
  for (const [id, change] of decided.inserting) if (!inserted.has(id)) results.set(change, RUN_AGAIN)
  await settleCreates(client, creates, firstCreateById, inserted, results)
  const planChanges = await settlePlans(client, decided, inserted, results)
  if (decided.toUpdate.length > 0) await client.query({ ...UPDATE_PLANTS, values: columnsOf(decided.toUpdate) })
  if (decided.toDelete.length > 0) await client.query({ ...DELETE_PLANTS, values: [decided.toDelete.map(String)] })
  const byOf = (id: bigint) => decided.byOf.get(id) ?? UNNAMED_WRITER
  const tagOf = (id: bigint) => decided.current.get(id)?.tag ?? null
  const recorded: PendingChange[] = [
    ...[...firstCreateById.values()].filter((plant) => inserted.has(plant.id))
      .map((plant) => ({ id: plant.id, tagBefore: null, created: true, after: plant, by: createdBy.get(plant.id) ?? UNNAMED_WRITER })),
    ...decided.toInsert.filter((plant) => inserted.has(plant.id) && !decided.planned.has(plant.id))
      .map((plant) => ({ id: plant.id, tagBefore: null, created: true, after: plant, by: byOf(plant.id) })),
    ...decided.toUpdate.filter((plant) => !decided.planned.has(plant.id))
      .map((plant) => ({ id: plant.id, tagBefore: tagOf(plant.id), created: false, after: plant, by: byOf(plant.id) })),
    ...decided.toDelete.filter((id) => !decided.planned.has(id))
      .map((id) => ({ id, tagBefore: tagOf(id), created: false, after: undefined, by: byOf(id) })),
    ...planChanges
  ]
  // Every event's row came back from one of the two statements, so their flags cover all of them.
  if (decided.subscribed || subscribed) await recordEvents(client, recorded)
  if (recorded.length > 0 && !createsOnly) await recordChanges(client, recorded)
  return operations.map((operation) => {
    const result = results.get(operation)
    if (result === undefined) throw new Error('a write batch left an operation without a result')
    return result
  })
}

interface DecidedChanges {
  /** Whether a subscription was enabled when the rows were locked (false when no row was). */
  readonly subscribed: boolean
  /** The plants the locked rows held. */
  readonly current: ReadonlyMap<bigint, PlantRecord>
  /** Who made the change (not a plan's) of each id. */
  readonly byOf: Map<bigint, string>
  readonly toInsert: PlantRecord[]
  readonly toUpdate: PlantRecord[]
  readonly toDelete: bigint[]
  /** The change behind each row of `toInsert`, by id. */
  readonly inserting: Map<bigint, ChangeOperation>
  /** The plans whose expectations held, with the ids each inserts; their rows are among the three above. */
  readonly plans: Map<PlanOperation, bigint[]>
  /** The ids the plans above write. */
  readonly planned: Set<bigint>
}

/**
 * Locks the rows of the changes' and the plans' ids, in one statement in id order, and decides each
 * change on its row and each plan on its expectations; writes nothing yet.
 */
async function lockAndDecide (
  client: pg.PoolClient,
  changes: readonly ChangeOperation[],
  plans: readonly PlanOperation[],
  results: BatchResults
): Promise<DecidedChanges> {
  const decided: DecidedChanges = {
    subscribed: false, current: new Map(), byOf: new Map(), toInsert: [], toUpdate: [], toDelete: [], inserting: new Map(), plans: new Map(), planned: new Set()
  }
  const ids = changes.map(idOf)
  const lockedIds = [...ids, ...plans.flatMap(({ plan }) => [...plan.expected.keys()])]
  if (lockedIds.length === 0) return decided
  const locked = await client.query<PlantRow & { subscribed: boolean }>({ ...LOCK_PLANTS, values: [lockedIds.map(String)] })
  const current = new Map(locked.rows.map((row) => [row.id, recordOfRow(row)]))
  const write = (id: bigint, before: PlantRecord | undefined, after: PlantRecord | undefined) => {
    if (before === undefined && after !== undefined) decided.toInsert.push(after)
    else if (before !== undefined && after === undefined) decided.toDelete.push(id)
    else if (before !== undefined && after !== undefined && !samePlant(before, after)) decided.toUpdate.push(after)
  }
  changes.forEach((change, index) => {
    const id = ids[index] as bigint
    const before = current.get(id)
    const { outcome, after } = decideChange(change, before)
    results.set(change, outcome)
    decided.byOf.set(id, change.by ?? UNNAMED_WRITER)
    if (before === undefined && after !== undefined) decided.inserting.set(id, change)
    write(id, before, after)
  })
  for (const operation of plans) {
    const { expected, changes: planned } = operation.plan
    if ([...expected].some(([id, plant]) => !sameState(current.get(id), plant))) {
      results.set(operation, STALE_PLAN)
      continue
    }
    const after = new Map(planned.map((change) => [change.id, change.after]))
    const inserts: bigint[] = []
    for (const [id, plant] of after) {
      if (current.get(id) === undefined && plant !== undefined) inserts.push(id)
      write(id, current.get(id), plant)
      decided.planned.add(id)
    }
    decided.plans.set(operation, inserts)
  }
  return { ...decided, current, subscribed: locked.rows[0]?.subscribed === true }
}

/**
 * Each plan's result: written, or stale when a row it meant to insert was inserted first by a concurrent
 * transaction; then the rows it inserted are deleted again and its updates and deletes left out. The
 * changes of the written plans, in their order.
 */
async function settlePlans (client: pg.PoolClient, decided: DecidedChanges, inserted: ReadonlySet<bigint>, results: BatchResults): Promise<PendingChange[]> {
  const changes: PendingChange[] = []
  const undone = new Set<bigint>()
  for (const [operation, inserts] of decided.plans) {
    if (inserts.every((id) => inserted.has(id))) {
      results.set(operation, WRITTEN_PLAN)
      const by = operation.by ?? UNNAMED_WRITER
      for (const { id, before, after } of operation.plan.changes) {
        changes.push({ id, tagBefore: before?.tag ?? null, created: before === undefined, after, by })
      }
      continue
    }
    results.set(operation, STALE_PLAN)
    for (const id of operation.plan.expected.keys()) undone.add(id)
  }
  if (undone.size === 0) return changes
  const insertedByUndone = [...undone].filter((id) => inserted.has(id))
  if (insertedByUndone.length > 0) await client.query({ ...DELETE_PLANTS, values: [insertedByUndone.map(String)] })
  removeWhere(decided.toUpdate, (plant) => undone.has(plant.id))
  removeWhere(decided.toDelete, (id) => undone.has(id))
  return changes
}

function removeWhere<T> (items: T[], remove: (item: T) => boolean): void {
  const kept = items.filter((item) => !remove(item))
  items.splice(0, items.length, ...kept)
}

const WRITTEN_PLAN: WriteOutcome = { status: 'written' }
const STALE_PLAN: WriteOutcome = { status: 'stale' }

/** Inserts the rows whose ids are free: which ids were, and whether a subscription was enabled (false when none was inserted). */
async function insertPlants (client: pg.PoolClient, plants: readonly PlantRecord[]): Promise<{ inserted: Set<bigint>, subscribed: boolean }> {
  const result = await client.query<{ id: bigint, subscribed: boolean }>({ ...INSERT_PLANTS, values: columnsOf(plants) })
  return { inserted: new Set(result.rows.map((row) => row.id)), subscribed: result.rows[0]?.subscribed === true }
}

/** As insertPlants, for a batch of creates only, recording their changes in the same statement. */
async function insertPlantsRecordingChanges (
  client: pg.PoolClient, plants: readonly PlantRecord[], createdBy: ReadonlyMap<bigint, string>
): Promise<{ inserted: Set<bigint>, subscribed: boolean }> {
  const values = [...columnsOf(plants), plants.map((plant) => createdBy.get(plant.id) ?? UNNAMED_WRITER)]
  const result = await client.query<{ id: bigint, subscribed: boolean }>({ ...INSERT_PLANTS_RECORDING_CHANGES, values })
  return { inserted: new Set(result.rows.map((row) => row.id)), subscribed: result.rows[0]?.subscribed === true }
}

/** Each create's result: created, or a replay of or a conflict with the row it met. */
async function settleCreates (
  client: pg.PoolClient,
  creates: readonly CreateOperation[],
  firstCreateById: ReadonlyMap<bigint, PlantRecord>,
  inserted: ReadonlySet<bigint>,
  results: BatchResults
): Promise<void> {
  const stored = new Map<bigint, PlantRecord>()
  const met = [...firstCreateById.keys()].filter((id) => !inserted.has(id)).map(String)
  if (met.length > 0) {
    const found = await client.query<PlantRow>({ ...SELECT_PLANTS, values: [met] })
    for (const row of found.rows) stored.set(row.id, recordOfRow(row))
  }
  for (const operation of creates) {
    const { plant } = operation
    const existing = inserted.has(plant.id) ? firstCreateById.get(plant.id) : stored.get(plant.id)
    // Met a row that a concurrent delete removed before it could be read: settle it in a later batch.
    if (existing === undefined) results.set(operation, RUN_AGAIN)
    else results.set(operation, existing === plant ? { status: 'created', plant } : outcomeOfMeeting(existing, plant))
  }
}

/** The columns of the rows of `plants`: ids, names, tags, folded names. */
function columnsOf (plants: readonly PlantRecord[]): [string[], string[], Array<string | null>, string[]] {
  return [
    plants.map((plant) => plant.id.toString()), plants.map((plant) => plant.name), plants.map((plant) => plant.tag ?? null),
    plants.map((plant) => foldName(plant.name))
  ]
}

const EVENT_TYPES: readonly WebhookEventType[] = ['plant.created', 'plant.updated', 'plant.deleted']

/**
 * The outbox half of the transactional outbox: one row per change and enabled subscription that wants
 * it, in the batch's transaction, so the events commit exactly when their writes do. One statement.
 */
async function recordEvents (client: pg.PoolClient, changes: readonly PendingChange[]): Promise<void> {
  if (changes.length === 0) return
  const now = Date.now()
  await client.query({
    ...INSERT_OUTBOX,
    values: [
      changes.map(newEventId), changes.map((change) => EVENT_TYPES[changeTypeCode(change) - 1]), changes.map((change) => change.id.toString()),
      changes.map(({ id, after }) => after === undefined ? deletedPlantBody(id) : plantJson(id, after.name, after.tag)), now
    ]
  })
}

/**
 * The change log half: the batch's changes, in order (RECORD_CHANGES), as the last statement of the
 * transaction on `client`. Exported for the test that makes transactions commit out of the order they
 * began in (test/store/change-order.test.ts): it numbers its own transactions with this very statement.
 */
export async function recordChanges (client: pg.PoolClient, changes: readonly PendingChange[]): Promise<void> {
  await client.query({
    ...RECORD_CHANGES,
    values: [
      changes.length, changes.map((change) => change.id.toString()), changes.map(changeTypeCode),
      changes.map((change) => change.after?.name ?? null), changes.map((change) => change.after?.tag ?? null), changes.map(leftTagOf),
      changes.map((change) => change.by)
    ]
  })
}
