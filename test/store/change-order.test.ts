/**
 * Issue 37, item 2, the PostgreSQL trap: a number taken before commit lets a reader pass `seq` N + 1
 * while N is still in flight, and never see N. The change log numbers a transaction's changes with its
 * last statement, which holds the head's row until COMMIT (src/store/postgres/write-batch.ts), so the
 * numbers follow commit order on every instance and have no gap.
 *
 * Here transactions commit out of the order they began in and out of the order they would have taken a
 * number in: raw transactions number their changes with the store's own statement (recordChanges) and
 * then hold, roll back, or begin first and number last, while store instances (separate pools, and a
 * service process) write and readers poll the feed with cursors of their own. Every reader must see
 * 1, 2, 3… with no break, and the log must fold to the store. The control at the end runs the same reader
 * on a naive log numbered by a SEQUENCE and watches it skip, so the instrument can fail.
 */
import pg from 'pg'
import { seeded } from '../../bench/plant-catalog.js'
import { describe, expect, it, onTestFinished } from 'vitest'
import { TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import { changeText, FeedReader, foldChanges, oneTo, storedPlants, storeFeed, wholeLog, type Numbered } from '../helpers/change-feed.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import type { ChangeRecord } from '../../src/store/change-log.js'
import { foldName } from '../../src/store/plant-names.js'
import type { PlantRecord, PlantStore } from '../../src/store/plant-store.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { recordChanges } from '../../src/store/postgres/write-batch.js'
import type { PlannedChange, WritePlan } from '../../src/store/write-operations.js'

const TOKEN = 'change-order-test-token'

/** One database, three store instances on it (each its own pool), and a raw pool for the test's own transactions. */
async function instances (): Promise<{ url: string, a: PlantStore, b: PlantStore, c: PlantStore, raw: pg.Pool }> {
  const url = await createTestDatabase()
  const a = await openPostgresStore(url, TEST_POSTGRES_OPTIONS) // migrates first
  onTestFinished(() => a.close())
  const [b, c] = await Promise.all([openPostgresStore(url, TEST_POSTGRES_OPTIONS), openPostgresStore(url, TEST_POSTGRES_OPTIONS)])
  onTestFinished(() => b.close())
  onTestFinished(() => c.close())
  const raw = new pg.Pool({ connectionString: url, max: 6 })
  raw.on('error', () => {})
  onTestFinished(() => raw.end())
  return { url, a, b, c, raw }
}

/** A transaction of the test's own on one connection: it writes plants, numbers their changes as the store does, and ends when told. */
interface HeldTransaction {
  /** Inserts the plants (not yet numbered). */
  insert (plants: readonly PlantRecord[]): Promise<void>
  /** Records the creates of these plants with the store's numbering statement: from then on it holds the head. The last seq it took. */
  number (plants: readonly PlantRecord[]): Promise<bigint>
  commit (): Promise<void>
  rollback (): Promise<void>
}

async function begin (raw: pg.Pool, by: string): Promise<HeldTransaction> {
  const client = await raw.connect()
  let ended = false
  // A test that fails with the transaction open drops its connection: the server rolls it back.
  onTestFinished(() => { if (!ended) client.release(true) })
  await client.query('BEGIN')
  const end = async (statement: string) => {
    await client.query(statement)
    ended = true
    client.release()
  }
  return {
    async insert (plants) {
      await client.query('INSERT INTO plants (id, name, tag, name_folded) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])', [
        plants.map((plant) => plant.id.toString()), plants.map((plant) => plant.name), plants.map((plant) => plant.tag ?? null),
        plants.map((plant) => foldName(plant.name))
      ])
    },
    async number (plants) {
      await recordChanges(client, plants.map((plant) => ({ id: plant.id, tagBefore: null, created: true, after: plant, by })))
      const { rows } = await client.query<{ last: string | null }>('SELECT max(seq) AS last FROM plant_changes WHERE plant_id = ANY($1::bigint[])', [
        plants.map((plant) => plant.id.toString())
      ])
      return BigInt(rows[0]?.last ?? -1)
    },
    commit: () => end('COMMIT'),
    rollback: () => end('ROLLBACK')
  }
}

/** How many transactions wait for the head's row (they are numbering their changes, ready to commit). */
async function waitingForHead (raw: pg.Pool): Promise<number> {
  const { rows } = await raw.query<{ waiting: number }>(`
    SELECT count(*)::int AS waiting FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE change_log_head%'`)
  return (rows[0] as { waiting: number }).waiting
}

/** Resolves once at least `count` transactions wait for the head; false if none did within `timeoutMs` (a bound, not a measurement). */
async function untilWaitingForHead (raw: pg.Pool, count: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (await waitingForHead(raw) < count) {
    if (Date.now() > deadline) return false
    await pause(5)
  }
  return true
}

async function head (raw: pg.Pool): Promise<bigint> {
  const { rows } = await raw.query<{ head: string }>('SELECT head FROM change_log_head')
  return BigInt((rows[0] as { head: string }).head)
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const seqs = (entries: readonly Numbered[]) => entries.map((entry) => entry.seq)
const texts = (changes: readonly ChangeRecord[]) => changes.map(changeText)

/** Polls every reader `times` times, one after another. */
async function pollAll (readers: ReadonlyArray<FeedReader<Numbered>>, times: number): Promise<void> {
  for (let time = 0; time < times; time++) for (const reader of readers) await reader.poll()
}

describe('The change feed on PostgreSQL, with transactions committing out of the order they began or took numbers in, on several instances', () => {
  it('given a transaction that took its numbers and holds them while two other instances are ready to commit, readers see nothing past it until it commits, then every change in order', async () => {
    // Arrange
    const { a, b, c, raw } = await instances()
    await a.create({ id: 1n, name: 'Before' }, 'a')
    const readers = [new FeedReader(storeFeed(a), 1, 'on A'), new FeedReader(storeFeed(b), 2, 'on B'), new FeedReader(storeFeed(c), 100, 'on C')]
    for (const reader of readers) await reader.drain()

    // Act: the held transaction numbers first and commits last of the three
    const held = await begin(raw, 'held')
    const heldPlant = { id: 100n, name: 'Held' }
    await held.insert([heldPlant])
    const heldSeq = await held.number([heldPlant])
    const fromA = a.create({ id: 2n, name: 'From A' }, 'a')
    const fromB = b.put({ id: 3n, name: 'From B', tag: 'b' }, undefined, 'b')
    const bothQueued = await untilWaitingForHead(raw, 2, 10_000)
    await pollAll(readers, 3)
    const seenWhileHeld = readers.map((reader) => seqs(reader.seen))
    await held.commit()
    await Promise.all([fromA, fromB])
    for (const reader of readers) await reader.drain()

    // Assert
    for (const reader of readers) expect({ reader: reader.name, breaks: reader.breaks, seqs: seqs(reader.seen) }).toEqual({ reader: reader.name, breaks: [], seqs: [1n, 2n, 3n, 4n] })
    expect(seenWhileHeld).toEqual([[1n], [1n], [1n]])
    expect({ heldSeq, bothQueued }).toEqual({ heldSeq: 2n, bothQueued: true })
    const log = await wholeLog(c)
    expect(texts(log.changes.slice(0, 2))).toEqual(['plant.created {"id":1,"name":"Before"}', 'plant.created {"id":100,"name":"Held"}'])
    expect(new Set(texts(log.changes.slice(2)))).toEqual(new Set(['plant.created {"id":2,"name":"From A"}', 'plant.created {"id":3,"name":"From B","tag":"b"}']))
    for (const reader of readers) expect(reader.seen).toEqual(log.changes)
  })

  it('given a transaction that took its numbers and rolls back while another instance waits, the waiting one takes the same numbers and no reader sees a gap', async () => {
    // Arrange
    const { a, b, c, raw } = await instances()
    await a.create({ id: 1n, name: 'Before' }, 'a')
    const readers = [new FeedReader(storeFeed(b), 1, 'on B'), new FeedReader(storeFeed(c), 10, 'on C')]
    for (const reader of readers) await reader.drain()

    // Act
    const aborted = await begin(raw, 'aborted')
    const abortedPlant = { id: 200n, name: 'Rolled back' }
    await aborted.insert([abortedPlant])
    const abortedSeq = await aborted.number([abortedPlant])
    const fromA = a.create({ id: 2n, name: 'From A' }, 'a')
    const queued = await untilWaitingForHead(raw, 1, 10_000)
    await pollAll(readers, 3)
    await aborted.rollback()
    await fromA
    for (const reader of readers) await reader.drain()

    // Assert
    const log = await wholeLog(c)
    for (const reader of readers) expect({ reader: reader.name, breaks: reader.breaks, seen: reader.seen }).toEqual({ reader: reader.name, breaks: [], seen: log.changes })
    expect(texts(log.changes)).toEqual(['plant.created {"id":1,"name":"Before"}', 'plant.created {"id":2,"name":"From A"}'])
    expect(seqs(log.changes)).toEqual([1n, 2n])
    expect({ abortedSeq, queued }).toEqual({ abortedSeq: 2n, queued: true })
    expect(await c.get(200n)).toBeUndefined()
  })

  it('given a transaction that began before two others and numbers after they committed, its change follows theirs and readers in between see no gap', async () => {
    // Arrange
    const { a, b, c, raw } = await instances()
    const readers = [new FeedReader(storeFeed(a), 1, 'on A'), new FeedReader(storeFeed(c), 10, 'on C')]

    // Act: began first, writes first, numbers last
    const early = await begin(raw, 'early')
    const earlyPlant = { id: 300n, name: 'Began first' }
    await early.insert([earlyPlant])
    await a.create({ id: 1n, name: 'From A' }, 'a')
    await b.create({ id: 2n, name: 'From B' }, 'b')
    for (const reader of readers) await reader.drain()
    const seenBefore = readers.map((reader) => seqs(reader.seen))
    const earlySeq = await early.number([earlyPlant])
    await pollAll(readers, 2)
    await early.commit()
    for (const reader of readers) await reader.drain()

    // Assert
    const log = await wholeLog(b)
    for (const reader of readers) expect({ reader: reader.name, breaks: reader.breaks, seen: reader.seen }).toEqual({ reader: reader.name, breaks: [], seen: log.changes })
    expect(texts(log.changes)).toEqual([
      'plant.created {"id":1,"name":"From A"}', 'plant.created {"id":2,"name":"From B"}', 'plant.created {"id":300,"name":"Began first"}'
    ])
    expect({ earlySeq, seenBefore }).toEqual({ earlySeq: 3n, seenBefore: [[1n, 2n], [1n, 2n]] })
  })

  it('given two pools and a service process writing every kind of write while raw transactions number late, hold their numbers or roll back, four readers see 1, 2, 3… and the log folds to the store', { timeout: 60_000 }, async () => {
    // Arrange
    const { url, a, b, c, raw } = await instances()
    const service = await startServer({ DATABASE_URL: url, PLANTSTORE_TOKENS: TOKEN })
    const readers = [
      new FeedReader(storeFeed(a), 1, 'on A, 1 a page'), new FeedReader(storeFeed(b), 3, 'on B, 3 a page'),
      new FeedReader(storeFeed(c), 10, 'on C, 10 a page'), new FeedReader(storeFeed(c), 100, 'on C, 100 a page')
    ]
    const state = { writing: true, writersDone: false }
    const answers: string[] = []
    const evidence = { numberedAfterOthers: 0, heldWithWaiters: 0, rolledBackWithWaiters: 0 }
    const committedPlants: PlantRecord[] = []
    const rolledBackPlants: PlantRecord[] = []

    // Act
    const following = readers.map(async (reader) => {
      while (state.writing) {
        await reader.poll()
        await pause(2)
      }
    })
    const writers = Promise.all([
      ...[0, 1, 2].map((worker) => storeWorker(a, `A${worker}`, 100 + worker, 30)),
      ...[0, 1, 2].map((worker) => storeWorker(b, `B${worker}`, 200 + worker, 30)),
      ...[0, 1].map((worker) => httpWorker(service.baseUrl, `S${worker}`, 300 + worker, 25, answers))
    ]).finally(() => { state.writersDone = true })
    // Their first rounds meet the writers at once; no round starts once the writers are done.
    const holders = [0, 1, 2].map(async (holder) => {
      for (let round = 0; round < 4 && !state.writersDone; round++) {
        const plants = [0, 1].map((offset) => ({ id: BigInt(10_000 + holder * 100 + round * 10 + offset), name: `held ${holder}.${round}.${offset}` }))
        const transaction = await begin(raw, `holder ${holder}`)
        await transaction.insert(plants)
        const kind = (holder + round) % 3
        if (kind === 0) {
          // Began before others and numbers after some of them committed.
          const headAtBegin = await head(raw)
          const deadline = Date.now() + 5000
          while (await head(raw) === headAtBegin && Date.now() < deadline) await pause(5)
          const last = await transaction.number(plants)
          if (last - 1n > headAtBegin + 1n) evidence.numberedAfterOthers++
          await transaction.commit()
          committedPlants.push(...plants)
        } else {
          // Took its numbers first and holds them while others queue behind it, then commits or rolls back.
          await transaction.number(plants)
          const waited = await untilWaitingForHead(raw, 1, 1000)
          await pause(20)
          if (kind === 1) {
            await transaction.commit()
            committedPlants.push(...plants)
            if (waited) evidence.heldWithWaiters++
          } else {
            await transaction.rollback()
            rolledBackPlants.push(...plants)
            if (waited) evidence.rolledBackWithWaiters++
          }
        }
        await pause(10 + holder * 7)
      }
    })
    try {
      await Promise.all([writers, ...holders])
    } finally {
      state.writing = false
      await Promise.all(following)
    }
    for (const reader of readers) await reader.drain()

    // Assert
    const log = await wholeLog(a)
    for (const reader of readers) {
      expect({ reader: reader.name, breaks: reader.breaks }).toEqual({ reader: reader.name, breaks: [] })
      expect(reader.seen).toEqual(log.changes)
    }
    expect(log.breaks).toEqual([])
    expect(seqs(log.changes)).toEqual(oneTo(Number(await a.changes.head())))
    expect(answers.filter((answer) => !/^(200|201|204|404|409) /.test(answer))).toEqual([])
    // Each way of committing out of order happened at least once (with another transaction meeting it).
    expect(Object.entries(evidence).filter(([, count]) => count === 0).map(([what]) => what)).toEqual([])
    const folded = foldChanges(log.changes)
    expect(folded.mismatches).toEqual([])
    expect(folded.plants).toEqual(await storedPlants(b))
    for (const plant of committedPlants) expect(folded.plants.has(plant.id.toString())).toBe(true)
    for (const plant of rolledBackPlants) expect(log.changes.some((change) => change.id === plant.id)).toBe(false)
    expect(new Set(log.changes.map((change) => change.type))).toEqual(new Set(['plant.created', 'plant.updated', 'plant.deleted']))
  })
})

describe('Control: the same reader on a naive log numbered by a SEQUENCE (not the store\'s log)', () => {
  it('given a transaction that took seq 1 early and commits after one that took seq 2, sees a break and never sees seq 1', async () => {
    // Arrange: a log as issue 37 warns against, its numbers taken by nextval as each change is written
    const raw = new pg.Pool({ connectionString: await createTestDatabase(), max: 3 })
    raw.on('error', () => {})
    onTestFinished(() => raw.end())
    await raw.query('CREATE SEQUENCE naive_seq; CREATE TABLE naive_changes (seq BIGINT PRIMARY KEY DEFAULT nextval(\'naive_seq\'), plant_id BIGINT NOT NULL)')
    const naiveFeed = async (after: bigint, limit: number) => (await raw.query<{ seq: string, plant_id: string }>(
      'SELECT seq, plant_id FROM naive_changes WHERE seq > $1 ORDER BY seq LIMIT $2', [after.toString(), limit]))
      .rows.map((row) => ({ seq: BigInt(row.seq), plantId: BigInt(row.plant_id) }))
    const reader = new FeedReader(naiveFeed, 100, 'naive')
    const write = async (client: pg.PoolClient, plantId: number) =>
      BigInt((await client.query<{ seq: string }>('INSERT INTO naive_changes (plant_id) VALUES ($1) RETURNING seq', [plantId])).rows[0]?.seq ?? -1)
    const slow = await raw.connect()
    const fast = await raw.connect()
    onTestFinished(() => { slow.release(true); fast.release(true) })

    // Act: the same interleaving the store's log is put through above
    await slow.query('BEGIN')
    const slowSeq = await write(slow, 1)
    await fast.query('BEGIN')
    const fastSeq = await write(fast, 2)
    await fast.query('COMMIT')
    await reader.poll()
    await slow.query('COMMIT')
    await reader.drain()

    // Assert: the instrument sees the trap
    expect({ slowSeq, fastSeq }).toEqual({ slowSeq: 1n, fastSeq: 2n })
    expect(reader.breaks).toEqual(['naive: after 0 came 2'])
    expect(reader.seen.map((entry) => entry.plantId)).toEqual([2n])
    expect(seqs(await naiveFeed(0n, 100))).toEqual([1n, 2n])
  })
})

/** The ids the instances share, so that their writes meet. */
const SHARED_IDS = 40

/** A seeded generator of numbers in [0, 1): the same mix of writes on every run; only their interleaving varies. */
function seededFraction (seed: number): () => number {
  const random = seeded(seed)
  return () => random() / 4294967296
}

function plantOf (document: string | undefined): PlantRecord | undefined {
  if (document === undefined) return undefined
  const { id, name, tag } = JSON.parse(document) as { id: number, name: string, tag?: string }
  return tag === undefined ? { id: BigInt(id), name } : { id: BigInt(id), name, tag }
}

/** `count` writes of every kind, one after another, on the shared ids, through a store instance. */
async function storeWorker (store: PlantStore, name: string, seed: number, count: number): Promise<void> {
  const random = seededFraction(seed)
  const pick = () => BigInt(1 + Math.floor(random() * SHARED_IDS))
  for (let step = 0; step < count; step++) {
    const id = pick()
    const label = `${name}.${step}`
    switch (Math.floor(random() * 5)) {
      case 0: await store.create({ id, name: label }, name); break
      case 1: await store.put({ id, name: label, tag: `t${step % 3}` }, undefined, name); break
      case 2: await store.patch(id, random() < 0.5 ? { tag: `p${step % 2}` } : { name: label, tag: null }, undefined, name); break
      case 3: await store.delete(id, undefined, name); break
      default: await store.writePlan(await planOn(store, [id, pick()], label), name)
    }
  }
}

/**
 * A plan (a batch) on two ids, decided on what they hold now: the first changes twice (created or
 * renamed, then retagged), the second is created or deleted. Stale when another write came first.
 */
async function planOn (store: PlantStore, ids: readonly bigint[], label: string): Promise<WritePlan> {
  const unique = [...new Set(ids)]
  const current = new Map(await Promise.all(unique.map(async (id) => [id, plantOf(await store.get(id))] as const)))
  const changes: PlannedChange[] = []
  const [first, second] = unique as [bigint, bigint | undefined]
  const renamed = { id: first, name: label }
  changes.push({ id: first, before: current.get(first), after: renamed })
  changes.push({ id: first, before: renamed, after: { ...renamed, tag: 'plan' } })
  if (second !== undefined) {
    const before = current.get(second)
    changes.push({ id: second, before, after: before === undefined ? { id: second, name: label } : undefined })
  }
  return { expected: current, changes }
}

/** `count` writes of every kind through the service's HTTP API, batches included; each answer as `status body`. */
async function httpWorker (baseUrl: string, name: string, seed: number, count: number, answers: string[]): Promise<void> {
  const random = seededFraction(seed)
  const pick = () => 1 + Math.floor(random() * SHARED_IDS)
  const send = async (method: string, path: string, body?: unknown, contentType = 'application/json') => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': contentType }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    answers.push(`${response.status} ${method} ${path} ${await response.text()}`)
  }
  for (let step = 0; step < count; step++) {
    const id = pick()
    const label = `${name}.${step}`
    switch (Math.floor(random() * 5)) {
      case 0: await send('POST', '/plants', { id, name: label }); break
      case 1: await send('PUT', `/plants/${id}`, { name: label, tag: `t${step % 3}` }); break
      case 2: await send('PATCH', `/plants/${id}`, { tag: random() < 0.5 ? `p${step % 2}` : null }, 'application/merge-patch+json'); break
      case 3: await send('DELETE', `/plants/${id}`); break
      default: {
        const other = pick()
        await send('POST', '/plants/batch', {
          operations: [
            { method: 'PUT', id, body: { name: label } },
            { method: 'PATCH', id, body: { tag: 'batch' } },
            ...(other === id ? [] : [{ method: 'PUT', id: other, body: { name: `${label} too` } }])
          ]
        })
      }
    }
  }
}
