import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { StoreUnavailableError, type PlantPage } from '../../../src/store/plant-store.js'
import { openPostgresConnection, type PostgresConnection, type PostgresConnectionOptions } from '../../../src/store/postgres/connection.js'
import { postgresPlantReads } from '../../../src/store/postgres/plants.js'
import { createTestDatabase } from '../../helpers/postgres-database.js'
import { startTcpProxy } from '../../helpers/tcp-proxy.js'

const FIRST_TWO: PlantPage = { json: '[{"id":1,"name":"first"},{"id":3,"name":"third"}]', nextAfter: 3n }

/** A test database holding plants 1, 3 and 5. */
async function databaseWithPlants (): Promise<string> {
  const url = await createTestDatabase()
  const setup = await openPostgresConnection(url, { poolSize: 1, connectTimeoutMs: 2000, statementTimeoutMs: 5000 })
  await setup.query({ text: 'INSERT INTO plants (id, name) VALUES (1, \'first\'), (3, \'third\'), (5, \'fifth\')' })
  await setup.close()
  return url
}

async function connected (url: string, options: PostgresConnectionOptions): Promise<PostgresConnection> {
  const connection = await openPostgresConnection(url, options)
  onTestFinished(() => connection.close())
  return connection
}

async function client (url: string): Promise<pg.Client> {
  const other = new pg.Client({ connectionString: url })
  await other.connect()
  onTestFinished(() => other.end())
  return other
}

/** Holds the connection's only pooled connection busy until the returned function is called. */
function holdPool (connection: PostgresConnection): () => Promise<void> {
  let release = () => {}
  const held = connection.transaction(() => new Promise<void>((resolve) => { release = resolve }))
  return async () => {
    release()
    await held
  }
}

async function failure (page: Promise<PlantPage>): Promise<unknown> {
  return page.then(() => new Error('the read succeeded'), (error: unknown) => error)
}

async function until (condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`)
    await sleep(20)
  }
}

describe('PostgreSQL page reads shared while they wait for a connection', () => {
  it('given requests sharing a read that cannot connect, each gets the store\'s unavailable error, and the next request reads afresh', async () => {
    const url = new URL(await databaseWithPlants())
    const proxy = await startTcpProxy(Number(url.port))
    onTestFinished(() => proxy.close())
    url.port = String(proxy.port)
    // A connect timeout far longer than the test: the next request would join a read still remembered.
    const connection = await connected(url.toString(), { poolSize: 1, connectTimeoutMs: 10_000, statementTimeoutMs: 5000 })
    const reads = postgresPlantReads(connection, undefined)
    proxy.reset()
    await until(async () => connection.poolUsage().total === 0)

    const failures = await Promise.all([reads.list({ limit: 2 }), reads.list({ limit: 2 }), reads.list({ limit: 2 })].map(failure))
    proxy.pass()
    const later = await reads.list({ limit: 2 })

    expect(failures[0]).toBeInstanceOf(StoreUnavailableError)
    // The connection is reset as it is made: `connect ECONNRESET …`, or `read ECONNRESET` should the reset come later.
    expect((failures[0] as Error).message).toMatch(/^PostgreSQL is unavailable \(.*ECONNRESET/)
    expect(failures[1]).toBe(failures[0])
    expect(failures[2]).toBe(failures[0])
    expect(later).toEqual(FIRST_TWO)
  })

  it('given requests sharing a read whose statement outlasts the statement timeout, each gets the store\'s unavailable error, and a later read succeeds', async () => {
    const url = await databaseWithPlants()
    const connection = await connected(url, { poolSize: 1, connectTimeoutMs: 2000, statementTimeoutMs: 300 })
    const reads = postgresPlantReads(connection, undefined)
    const locker = await client(url)
    await locker.query('BEGIN')
    await locker.query('LOCK TABLE plants IN ACCESS EXCLUSIVE MODE')

    const failures = await Promise.all([reads.list({ limit: 2 }), reads.list({ limit: 2 }), reads.list({ limit: 2 })].map(failure))
    await locker.query('COMMIT')
    const later = await reads.list({ limit: 2 })

    expect(failures[0]).toBeInstanceOf(StoreUnavailableError)
    expect((failures[0] as Error).message).toBe('PostgreSQL is unavailable (57014)')
    expect(failures[1]).toBe(failures[0])
    expect(failures[2]).toBe(failures[0])
    expect(later).toEqual(FIRST_TWO)
  })

  it('given a request for a page whose statement was sent and has not completed, it reads on its own and sees a plant committed after that statement was sent', async () => {
    const url = await databaseWithPlants()
    const admin = await client(url)
    // In REPEATABLE READ a statement's snapshot is taken before it waits for the table's lock: the first
    // read below, sent while the table is locked, cannot see the plant the lock's holder commits.
    await admin.query(`ALTER DATABASE ${new URL(url).pathname.slice(1)} SET default_transaction_isolation = 'repeatable read'`)
    const connection = await connected(url, { poolSize: 1, connectTimeoutMs: 5000, statementTimeoutMs: 5000 })
    const reads = postgresPlantReads(connection, undefined)
    const locker = await client(url)
    await locker.query('BEGIN')
    await locker.query('LOCK TABLE plants IN ACCESS EXCLUSIVE MODE')

    const first = reads.list({ limit: 2 })
    await until(async () => (await admin.query('SELECT 1 FROM pg_locks WHERE relation = \'plants\'::regclass AND NOT granted')).rowCount === 1)
    // The pool's only connection runs the first statement: this read waits for it, after the commit below.
    const second = reads.list({ limit: 2 })
    await locker.query('INSERT INTO plants (id, name) VALUES (2, \'committed after the first statement was sent\')')
    await locker.query('COMMIT')

    expect(await first).toEqual(FIRST_TWO)
    expect(await second).toEqual({ json: '[{"id":1,"name":"first"},{"id":2,"name":"committed after the first statement was sent"}]', nextAfter: 2n })
  })

  it('given a request for a page whose read has waited half the connect timeout, it reads on its own and keeps its own wait when that read times out', async () => {
    const url = await databaseWithPlants()
    const connection = await connected(url, { poolSize: 1, connectTimeoutMs: 1500, statementTimeoutMs: 5000 })
    const reads = postgresPlantReads(connection, undefined)
    const release = holdPool(connection)

    let firstSettled = false
    const first = failure(reads.list({ limit: 2 })).finally(() => { firstSettled = true })
    const joined = failure(reads.list({ limit: 2 }))
    await sleep(1000)
    // Past half the connect timeout (750 ms) and before the first read's 1500 ms are up.
    expect(firstSettled).toBe(false)
    const late = reads.list({ limit: 2 })
    const firstFailure = await first
    await release()

    expect(firstFailure).toBeInstanceOf(StoreUnavailableError)
    expect((firstFailure as Error).message).toBe('PostgreSQL is unavailable (timeout exceeded when trying to connect)')
    expect(await joined).toBe(firstFailure)
    expect(await late).toEqual(FIRST_TWO)
  })
})
