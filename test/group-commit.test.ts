import { join } from 'node:path'
import Database from '../src/store/sqlite-driver.js'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PlantStore } from '../src/store/plant-store.js'
import { StoreUnavailableError } from '../src/store/plant-store.js'
import { openPostgresStore } from '../src/store/postgres.js'
import { openSqliteStore } from '../src/store/sqlite.js'
import { bearer, buildTestApp, TEST_POSTGRES_OPTIONS, temporaryFolder } from './helper.js'
import { createTestDatabase } from './postgres-database.js'

interface DurableBackend {
  readonly name: string
  /** Opens a fresh store that reports every committed batch's size into `batches`. */
  open (batches: number[]): Promise<{ store: PlantStore, location: string }>
}

const durableBackends: readonly DurableBackend[] = [
  {
    name: 'sqlite',
    async open (batches) {
      const file = join(temporaryFolder(), 'batch.db')
      const store = openSqliteStore(file, { busyTimeoutMs: 20, onBatchCommitted: (size) => batches.push(size) })
      onTestFinished(() => store.close())
      return { store, location: file }
    }
  },
  {
    name: 'postgres',
    async open (batches) {
      const url = await createTestDatabase()
      const store = await openPostgresStore(url, { ...TEST_POSTGRES_OPTIONS, onBatchCommitted: (size) => batches.push(size) })
      onTestFinished(() => store.close())
      return { store, location: url }
    }
  }
]

async function connectPostgres (url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  onTestFinished(() => client.end())
  return client
}

describe.each(durableBackends)('Group commit on $name', (backend) => {
  it('answers every write of one batch with its own outcome, repeated ids included', async () => {
    const batches: number[] = []
    const { store } = await backend.open(batches)
    await Promise.all([store.create({ id: 1n, name: 'Fern' }), store.create({ id: 2n, name: 'Fern' }), store.create({ id: 5n, name: 'Old' })])
    batches.length = 0

    const outcomes = await Promise.all([
      store.create({ id: 3n, name: 'New' }),
      store.create({ id: 1n, name: 'Fern' }),
      store.create({ id: 2n, name: 'Cactus' }),
      store.create({ id: 4n, name: 'Twin' }),
      store.create({ id: 4n, name: 'Twin' }),
      store.create({ id: 4n, name: 'Rival' }),
      store.delete(5n),
      store.delete(5n),
      store.delete(6n)
    ])

    // A repeated delete of one id goes in the next batch: only creates of one id share a batch.
    expect(batches).toEqual([7, 2])
    expect(outcomes).toEqual([
      { status: 'created', plant: { id: 3n, name: 'New' } },
      { status: 'replayed', plant: { id: 1n, name: 'Fern' } },
      { status: 'conflict', existing: { id: 2n, name: 'Fern' } },
      { status: 'created', plant: { id: 4n, name: 'Twin' } },
      { status: 'replayed', plant: { id: 4n, name: 'Twin' } },
      { status: 'conflict', existing: { id: 4n, name: 'Twin' } },
      { status: 'deleted' },
      { status: 'not-found' },
      { status: 'not-found' }
    ])
    expect(await store.get(4n)).toBe('{"id":4,"name":"Twin"}')
    expect(await store.get(5n)).toBeUndefined()
  })

  it('keeps arrival order for a create and a delete of one id by cutting the batch between them', async () => {
    const batches: number[] = []
    const { store } = await backend.open(batches)

    const outcomes = await Promise.all([
      store.create({ id: 7n, name: 'Short-lived' }),
      store.delete(7n),
      store.create({ id: 7n, name: 'Second life' })
    ])

    expect(outcomes).toEqual([
      { status: 'created', plant: { id: 7n, name: 'Short-lived' } },
      { status: 'deleted' },
      { status: 'created', plant: { id: 7n, name: 'Second life' } }
    ])
    expect(batches).toEqual([1, 1, 1])
  })

  it('commits a lone write at once when idle, with no timer in the way', async () => {
    const batches: number[] = []
    const { store } = await backend.open(batches)

    await store.create({ id: 8n, name: 'Alone' })
    await store.create({ id: 9n, name: 'Alone too' })

    expect(batches).toEqual([1, 1])
  })
})

const readBatchingBackends = [
  {
    name: 'SQLite',
    open: async (readBatches: number[]) =>
      openSqliteStore(join(temporaryFolder(), 'reads.db'), { onReadBatch: (size) => readBatches.push(size) })
  },
  {
    name: 'PostgreSQL',
    open: async (readBatches: number[]) =>
      openPostgresStore(await createTestDatabase(), { ...TEST_POSTGRES_OPTIONS, onReadBatch: (size) => readBatches.push(size) })
  }
]

describe.each(readBatchingBackends)('Batched reads on $name', (backend) => {
  it('answers concurrent GETs, found and missing, each with its own plant, in shared queries', async () => {
    const readBatches: number[] = []
    const store = await backend.open(readBatches)
    onTestFinished(() => store.close())
    await Promise.all([1n, 2n, 9007199254740993n, -(2n ** 63n)].map((id) => store.create({ id, name: `plant "${id}"`, tag: 't' })))

    const lone = await store.get(2n)
    const ids = [9007199254740993n, 1n, 404n, 2n, 1n, -(2n ** 63n), ...Array.from({ length: 44 }, (_, index) => BigInt(1000 + index))]
    const together = await Promise.all(ids.map((id) => store.get(id)))

    expect(lone).toBe('{"id":2,"name":"plant \\"2\\"","tag":"t"}')
    expect(together.slice(0, 6)).toEqual([
      '{"id":9007199254740993,"name":"plant \\"9007199254740993\\"","tag":"t"}',
      '{"id":1,"name":"plant \\"1\\"","tag":"t"}',
      undefined,
      '{"id":2,"name":"plant \\"2\\"","tag":"t"}',
      '{"id":1,"name":"plant \\"1\\"","tag":"t"}',
      '{"id":-9223372036854775808,"name":"plant \\"-9223372036854775808\\"","tag":"t"}'
    ])
    expect(together.slice(6)).toEqual(Array.from({ length: 44 }, () => undefined))
    // The lone read went alone; the 50 asked for in one event-loop turn shared one query.
    expect(readBatches).toEqual([1, 50])
  })

  it('rejects the reads of a batch whose query fails', async () => {
    const readBatches: number[] = []
    const store = await backend.open(readBatches)
    await store.create({ id: 1n, name: 'Fern' })
    await store.close()

    const failed = await Promise.allSettled([store.get(1n), store.get(2n)])

    expect(failed.map((result) => result.status)).toEqual(['rejected', 'rejected'])
    expect(readBatches).toEqual([])
  })
})

describe('A failed commit', () => {
  it('on SQLite fails exactly its batch with StoreUnavailableError, and the next batch commits', async () => {
    const batches: number[] = []
    const { store, location } = await durableBackends[0]!.open(batches)
    const otherProcess = new Database(location)
    onTestFinished(() => { otherProcess.close() })
    otherProcess.exec('BEGIN IMMEDIATE')

    const failed = await Promise.allSettled([store.create({ id: 1n, name: 'a' }), store.create({ id: 2n, name: 'b' })])
    otherProcess.exec('ROLLBACK')
    const next = await Promise.all([store.create({ id: 3n, name: 'c' })])

    expect(failed.map((result) => result.status === 'rejected' && result.reason instanceof StoreUnavailableError)).toEqual([true, true])
    expect(next).toEqual([{ status: 'created', plant: { id: 3n, name: 'c' } }])
    expect([await store.get(1n), await store.get(2n)]).toEqual([undefined, undefined])
    expect(batches).toEqual([1])
  })

  it('on PostgreSQL fails exactly its batch with StoreUnavailableError, and the next batch commits', async () => {
    const batches: number[] = []
    const { store, location } = await durableBackends[1]!.open(batches)
    const admin = await connectPostgres(location)
    // A deferred constraint trigger fails the COMMIT itself of any transaction that stores "poison".
    await admin.query(`
      CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned batch'; END IF; RETURN NEW; END $$;
      CREATE CONSTRAINT TRIGGER refuse_poison AFTER INSERT ON plants DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION refuse_poison();`)

    const failed = await Promise.allSettled([
      store.create({ id: 1n, name: 'good' }), store.create({ id: 2n, name: 'poison' }), store.delete(3n)
    ])
    const next = await Promise.all([store.create({ id: 1n, name: 'good' }), store.create({ id: 4n, name: 'fine' })])

    expect(failed.map((result) => result.status === 'rejected' && result.reason instanceof StoreUnavailableError)).toEqual([true, true, true])
    expect(next.map((outcome) => outcome.status)).toEqual(['created', 'created'])
    expect(await store.get(2n)).toBeUndefined()
    expect(batches).toEqual([2])
  })
})

/**
 * Sends a create while another connection holds the lock its commit needs, and reports whether the
 * HTTP answer arrived before `release` let the commit through, and the answer's status.
 */
async function createWhileLocked (app: FastifyInstance, release: () => Promise<void>) {
  let answered = false
  const response = app.inject({
    method: 'POST', url: '/plants', headers: { ...bearer(), 'content-type': 'application/json' }, payload: '{"id":1,"name":"Patient"}'
  }).then((reply) => { answered = true; return reply })
  await new Promise((resolve) => setTimeout(resolve, 500))
  const answeredWhileLocked = answered
  await release()
  return { answeredWhileLocked, status: (await response).statusCode }
}

describe('No reply before commit', () => {
  it('holds the HTTP answer of a create until its SQLite transaction has committed', async () => {
    const file = join(temporaryFolder(), 'patient.db')
    const app = await buildTestApp({ store: openSqliteStore(file, { busyTimeoutMs: 2000 }) })
    const otherProcess = new Database(file)
    onTestFinished(() => { otherProcess.close() })
    otherProcess.exec('BEGIN IMMEDIATE')

    const result = await createWhileLocked(app, async () => { otherProcess.exec('ROLLBACK') })

    expect(result).toEqual({ answeredWhileLocked: false, status: 200 })
  })

  it('holds the HTTP answer of a create until its PostgreSQL transaction has committed', async () => {
    const url = await createTestDatabase()
    const app = await buildTestApp({ store: await openPostgresStore(url, TEST_POSTGRES_OPTIONS) })
    const locker = await connectPostgres(url)
    await locker.query('BEGIN')
    await locker.query('LOCK TABLE plants IN SHARE MODE')

    const result = await createWhileLocked(app, async () => { await locker.query('COMMIT') })

    expect(result).toEqual({ answeredWhileLocked: false, status: 200 })
  })
})
