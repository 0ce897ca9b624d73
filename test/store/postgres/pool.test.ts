import { describe, expect, it, onTestFinished } from 'vitest'
import { openPostgresConnection } from '../../../src/store/postgres/connection.js'
import { createPostgresPool } from '../../../src/store/postgres/pool.js'
import { createTestDatabase } from '../../helpers/postgres-database.js'

const OPTIONS = { poolSize: 1, connectTimeoutMs: 2000, statementTimeoutMs: 1234 }
const SHOW_TIMEOUT = { text: 'SHOW statement_timeout' }
const NAMED = { name: 'plantstore-pool-test', text: 'SELECT 1 AS one' }
const PREPARED = { text: 'SELECT name FROM pg_prepared_statements' }

describe('the PostgreSQL pool for each DATABASE_POOLING mode (on PostgreSQL directly)', () => {
  it('given direct or session, the timeout is set once per connection and statements are prepared under their names', async () => {
    for (const pooling of ['direct', 'session'] as const) {
      const connection = await openPostgresConnection(await createTestDatabase(), { ...OPTIONS, pooling })
      onTestFinished(() => connection.close())
      await connection.query(NAMED)

      expect((await connection.query<{ statement_timeout: string }>(SHOW_TIMEOUT)).rows).toEqual([{ statement_timeout: '1234ms' }])
      // One connection (poolSize 1): the statement prepared by the first query is still there.
      expect((await connection.query<{ name: string }>(PREPARED)).rows).toEqual([{ name: 'plantstore-pool-test' }])
      expect(connection.canListen).toBe(true)
    }
  })

  it('given transaction, every statement runs bounded by SET LOCAL, nothing stays on the session, and nothing is prepared under a name', async () => {
    const url = await createTestDatabase()
    const connection = await openPostgresConnection(url, { ...OPTIONS, pooling: 'transaction' })
    onTestFinished(() => connection.close())
    await connection.query(NAMED)

    expect((await connection.query<{ statement_timeout: string }>(SHOW_TIMEOUT)).rows).toEqual([{ statement_timeout: '1234ms' }])
    expect(await connection.transaction(async (client) => (await client.query<{ statement_timeout: string }>(SHOW_TIMEOUT)).rows))
      .toEqual([{ statement_timeout: '1234ms' }])
    expect((await connection.query(PREPARED)).rows).toEqual([])
    expect(connection.canListen).toBe(false)
    // On one connection: the timeout holds inside the transaction and is gone after it (the server's default).
    const { pool, beginBounded } = createPostgresPool(url, { ...OPTIONS, pooling: 'transaction' })
    onTestFinished(() => pool.end())
    const client = await pool.connect()
    await client.query(beginBounded('BEGIN ISOLATION LEVEL READ COMMITTED'))
    const inside = (await client.query<{ statement_timeout: string }>(SHOW_TIMEOUT)).rows
    await client.query('COMMIT')
    const after = (await client.query<{ statement_timeout: string }>(SHOW_TIMEOUT)).rows
    client.release()
    expect({ inside, after }).toEqual({ inside: [{ statement_timeout: '1234ms' }], after: [{ statement_timeout: '0' }] })
  })
})
