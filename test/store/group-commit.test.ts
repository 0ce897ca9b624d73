import { createHash } from 'node:crypto'
import { join } from 'node:path'
import Database from '../../src/store/sqlite/driver.js'
import type { FastifyInstance, InjectOptions } from 'fastify'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { PlantStore } from '../../src/store/plant-store.js'
import { StoreUnavailableError } from '../../src/store/plant-store.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { bearer, buildTestApp, postPlant, TEST_POSTGRES_OPTIONS, temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

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

  it('answers a create, put, patch, conditional put and delete of one id sent together as one after another', async () => {
    const batches: number[] = []
    const { store } = await backend.open(batches)
    await Promise.all([store.create({ id: 21n, name: 'Twenty-one', tag: 'old' }), store.create({ id: 22n, name: 'Twenty-two' })])
    batches.length = 0
    const patchedTen = { id: 10n, name: 'Replaced', tag: 'patched' }

    const outcomes = await Promise.all([
      store.create({ id: 10n, name: 'Start', tag: 'a' }),
      store.create({ id: 10n, name: 'Start', tag: 'a' }),
      store.create({ id: 20n, name: 'Twenty' }),
      store.put({ id: 10n, name: 'Replaced' }),
      store.patch(21n, { tag: null }),
      store.patch(10n, { tag: 'patched' }),
      store.put({ id: 20n, name: 'Twenty again', tag: '' }),
      store.put({ id: 10n, name: 'Conditional' }, { plant: patchedTen }),
      store.put({ id: 10n, name: 'Too late' }, { plant: patchedTen }),
      store.delete(22n),
      store.delete(10n),
      store.delete(10n, { plant: { id: 10n, name: 'Conditional' } }),
      store.patch(10n, { name: 'Nobody' }),
      store.create({ id: 10n, name: 'Reborn' })
    ])

    expect(outcomes).toEqual([
      { status: 'created', plant: { id: 10n, name: 'Start', tag: 'a' } },
      { status: 'replayed', plant: { id: 10n, name: 'Start', tag: 'a' } },
      { status: 'created', plant: { id: 20n, name: 'Twenty' } },
      { status: 'replaced', plant: { id: 10n, name: 'Replaced' } },
      { status: 'patched', plant: { id: 21n, name: 'Twenty-one' } },
      { status: 'patched', plant: patchedTen },
      { status: 'replaced', plant: { id: 20n, name: 'Twenty again', tag: '' } },
      { status: 'replaced', plant: { id: 10n, name: 'Conditional' } },
      { status: 'stale', current: { id: 10n, name: 'Conditional' } },
      { status: 'deleted' },
      { status: 'deleted' },
      { status: 'stale', current: undefined },
      { status: 'not-found' },
      { status: 'created', plant: { id: 10n, name: 'Reborn' } }
    ])
    // Each write of id 10 other than the repeated create starts a batch; the other ids ride along.
    expect(batches).toEqual([3, 2, 2, 1, 2, 1, 1, 1, 1])
    expect((await store.list({ limit: 10 })).json).toBe(
      '[{"id":10,"name":"Reborn"},{"id":20,"name":"Twenty again","tag":""},{"id":21,"name":"Twenty-one"}]')
  })

  it('commits updates of many ids in one batch together with creates and deletes', async () => {
    const batches: number[] = []
    const { store } = await backend.open(batches)
    const seeded = Array.from({ length: 30 }, (_, index) => ({ id: BigInt(index + 1), name: `plant ${index + 1}`, tag: 'seed' }))
    await Promise.all(seeded.map((plant) => store.create(plant)))
    batches.length = 0
    const range = (first: number, count: number) => Array.from({ length: count }, (_, index) => BigInt(first + index))

    const [puts, patches, deletes, creates, others] = await Promise.all([
      Promise.all(range(1, 10).map((id) => store.put({ id, name: `put ${id}` }))),
      Promise.all(range(11, 10).map((id) => store.patch(id, { tag: `patched ${id}` }))),
      Promise.all(range(21, 5).map((id) => store.delete(id))),
      Promise.all(range(101, 10).map((id) => store.create({ id, name: `new ${id}` }))),
      Promise.all([
        store.put({ id: 26n, name: 'kept its version' }, { plant: { id: 26n, name: 'plant 26', tag: 'seed' } }),
        store.patch(27n, { name: 'missed its version' }, { plant: { id: 27n, name: 'plant 27' } }),
        store.put({ id: 200n, name: 'put new' }),
        store.patch(300n, { name: 'nowhere' }),
        store.delete(301n)
      ])
    ])

    expect(batches).toEqual([40])
    expect(puts).toEqual(range(1, 10).map((id) => ({ status: 'replaced', plant: { id, name: `put ${id}` } })))
    expect(patches).toEqual(range(11, 10).map((id) => ({ status: 'patched', plant: { id, name: `plant ${id}`, tag: `patched ${id}` } })))
    expect(deletes).toEqual(range(21, 5).map(() => ({ status: 'deleted' })))
    expect(creates).toEqual(range(101, 10).map((id) => ({ status: 'created', plant: { id, name: `new ${id}` } })))
    expect(others).toEqual([
      { status: 'replaced', plant: { id: 26n, name: 'kept its version' } },
      { status: 'stale', current: { id: 27n, name: 'plant 27', tag: 'seed' } },
      { status: 'created', plant: { id: 200n, name: 'put new' } },
      { status: 'not-found' },
      { status: 'not-found' }
    ])
    const expectedDocuments = [
      ...range(1, 10).map((id) => `{"id":${id},"name":"put ${id}"}`),
      ...range(11, 10).map((id) => `{"id":${id},"name":"plant ${id}","tag":"patched ${id}"}`),
      '{"id":26,"name":"kept its version"}',
      ...range(27, 4).map((id) => `{"id":${id},"name":"plant ${id}","tag":"seed"}`),
      ...range(101, 10).map((id) => `{"id":${id},"name":"new ${id}"}`),
      '{"id":200,"name":"put new"}'
    ]
    expect((await store.list({ limit: 100 })).json).toBe(`[${expectedDocuments.join(',')}]`)
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
 * Sends `requests` while another connection holds the lock their commit needs, and reports for each
 * whether its HTTP answer arrived before `release` let the commit through, and the answer.
 */
async function writeWhileLocked (app: FastifyInstance, requests: readonly InjectOptions[], release: () => Promise<void>) {
  const answered = requests.map(() => false)
  const responses = requests.map((request, index) => app.inject(request).then((reply) => { answered[index] = true; return reply }))
  await new Promise((resolve) => setTimeout(resolve, 500))
  const answeredWhileLocked = [...answered]
  await release()
  const answers = (await Promise.all(responses)).map((reply) => ({ status: reply.statusCode, body: reply.body, etag: reply.headers.etag }))
  return { answeredWhileLocked, answers }
}

/** The ETag docs/reference/api/plant-updates.md gives a plant's JSON document: 27 characters of its base64url SHA-256, quoted. */
const strongEntityTag = (document: string) => `"${createHash('sha256').update(document).digest('base64url').slice(0, 27)}"`

const createPatient: InjectOptions = {
  method: 'POST', url: '/plants', headers: { ...bearer(), 'content-type': 'application/json' }, payload: '{"id":1,"name":"Patient"}'
}

/**
 * Stores plants 1 and 2, then returns a PUT that creates plant 3, a PUT that replaces plant 1 and a
 * PATCH of plant 2 under If-Match, with what each must answer once committed.
 */
async function updatesOfStoredPlants (app: FastifyInstance) {
  await postPlant(app, { id: 1, name: 'Patient' })
  const second = await postPlant(app, { id: 2, name: 'Waiting', tag: 'old' })
  const requests: InjectOptions[] = [
    { method: 'PUT', url: '/plants/3', headers: { ...bearer(), 'content-type': 'application/json' }, payload: '{"name":"Created late"}' },
    { method: 'PUT', url: '/plants/1', headers: { ...bearer(), 'content-type': 'application/json' }, payload: '{"name":"Replaced late","tag":"t"}' },
    {
      method: 'PATCH',
      url: '/plants/2',
      headers: { ...bearer(), 'content-type': 'application/merge-patch+json', 'if-match': second.headers.etag as string },
      payload: '{"tag":null}'
    }
  ]
  const bodies = ['{"id":3,"name":"Created late"}', '{"id":1,"name":"Replaced late","tag":"t"}', '{"id":2,"name":"Waiting"}']
  const answers = [201, 200, 200].map((status, index) => ({ status, body: bodies[index], etag: strongEntityTag(bodies[index] as string) }))
  return { requests, answers }
}

async function expectStored (app: FastifyInstance, documents: readonly string[]): Promise<void> {
  const response = await app.inject({ method: 'GET', url: '/plants', headers: bearer() })
  expect(response.body).toBe(`[${documents.join(',')}]`)
}

describe('No reply before commit', () => {
  it('holds the HTTP answer of a create until its SQLite transaction has committed', async () => {
    const file = join(temporaryFolder(), 'patient.db')
    const app = await buildTestApp({ store: openSqliteStore(file, { busyTimeoutMs: 2000 }) })
    const otherProcess = new Database(file)
    onTestFinished(() => { otherProcess.close() })
    otherProcess.exec('BEGIN IMMEDIATE')

    const result = await writeWhileLocked(app, [createPatient], async () => { otherProcess.exec('ROLLBACK') })

    expect(result).toEqual({ answeredWhileLocked: [false], answers: [{ status: 200, body: '{"name":"Patient"}', etag: strongEntityTag('{"id":1,"name":"Patient"}') }] })
  })

  it('holds the HTTP answer of a create until its PostgreSQL transaction has committed', async () => {
    const url = await createTestDatabase()
    const app = await buildTestApp({ store: await openPostgresStore(url, TEST_POSTGRES_OPTIONS) })
    const locker = await connectPostgres(url)
    await locker.query('BEGIN')
    await locker.query('LOCK TABLE plants IN SHARE MODE')

    const result = await writeWhileLocked(app, [createPatient], async () => { await locker.query('COMMIT') })

    expect(result).toEqual({ answeredWhileLocked: [false], answers: [{ status: 200, body: '{"name":"Patient"}', etag: strongEntityTag('{"id":1,"name":"Patient"}') }] })
  })

  it('holds the HTTP answers of PUT and PATCH until their SQLite transaction has committed', async () => {
    const file = join(temporaryFolder(), 'patient.db')
    const app = await buildTestApp({ store: openSqliteStore(file, { busyTimeoutMs: 2000 }) })
    const { requests, answers } = await updatesOfStoredPlants(app)
    const otherProcess = new Database(file)
    onTestFinished(() => { otherProcess.close() })
    otherProcess.exec('BEGIN IMMEDIATE')

    const result = await writeWhileLocked(app, requests, async () => { otherProcess.exec('ROLLBACK') })

    expect(result).toEqual({ answeredWhileLocked: [false, false, false], answers })
    await expectStored(app, ['{"id":1,"name":"Replaced late","tag":"t"}', '{"id":2,"name":"Waiting"}', '{"id":3,"name":"Created late"}'])
  })

  it('holds the HTTP answers of PUT and PATCH until their PostgreSQL transaction has committed', async () => {
    const url = await createTestDatabase()
    const app = await buildTestApp({ store: await openPostgresStore(url, TEST_POSTGRES_OPTIONS) })
    const { requests, answers } = await updatesOfStoredPlants(app)
    const locker = await connectPostgres(url)
    await locker.query('BEGIN')
    await locker.query('LOCK TABLE plants IN SHARE MODE')

    const result = await writeWhileLocked(app, requests, async () => { await locker.query('COMMIT') })

    expect(result).toEqual({ answeredWhileLocked: [false, false, false], answers })
    await expectStored(app, ['{"id":1,"name":"Replaced late","tag":"t"}', '{"id":2,"name":"Waiting"}', '{"id":3,"name":"Created late"}'])
  })
})
