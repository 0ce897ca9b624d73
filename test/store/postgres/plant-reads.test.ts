import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { openMemoryStore } from '../../../src/store/memory/store.js'
import type { PageRequest, PlantRecord, PlantStore } from '../../../src/store/plant-store.js'
import { openPostgresConnection } from '../../../src/store/postgres/connection.js'
import { postgresPlantReads } from '../../../src/store/postgres/plants.js'
import { openPostgresStore } from '../../../src/store/postgres/store.js'
import { createTestDatabase } from '../../helpers/postgres-database.js'

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n
const PLANTS: readonly PlantRecord[] = [
  { id: INT64_MIN, name: 'smallest', tag: 'x' },
  { id: -1n, name: 'quote " and backslash \\', tag: 'x' },
  { id: 0n, name: 'no tag' },
  { id: 7n, name: 'line\nfeed and tab\t', tag: '' },
  { id: 8n, name: 'Café 🌿', tag: 'x' },
  { id: 9007199254740993n, name: 'beyond a double', tag: 'x' },
  { id: INT64_MAX, name: 'largest', tag: 'y' }
]
const REQUESTS: readonly PageRequest[] = [
  { limit: 100 }, { limit: 3 }, { limit: 1 }, { after: -1n, limit: 2 }, { after: 8n, limit: 2 }, { after: INT64_MAX, limit: 5 },
  { limit: 100, tag: 'x' }, { limit: 2, tag: 'x' }, { after: 0n, limit: 1, tag: 'x' }, { limit: 5, tag: '' }, { limit: 5, tag: 'z' }
]
const POOLINGS = ['direct', 'transaction'] as const

async function filled (store: PlantStore): Promise<PlantStore> {
  onTestFinished(() => store.close())
  for (const plant of PLANTS) await store.create(plant)
  return store
}

describe('the PostgreSQL plant reads, which build documents from the rows\' text as they arrive', () => {
  for (const pooling of POOLINGS) {
    it(`given DATABASE_POOLING=${pooling}, every page, as JSON and as lines, all plants or one tag's, is the memory store's to the byte`, async () => {
      const postgres = await filled(await openPostgresStore(await createTestDatabase(), { poolSize: 2, connectTimeoutMs: 2000, statementTimeoutMs: 5000, pooling }))
      const memory = await filled(openMemoryStore())

      for (const request of REQUESTS) {
        for (const lines of [false, true]) {
          expect({ request, page: await postgres.list({ ...request, lines }) }).toEqual({ request, page: await memory.list({ ...request, lines }) })
        }
      }
    })

    it(`given DATABASE_POOLING=${pooling}, concurrent GETs of plants present and absent each get their own document`, async () => {
      const postgres = await filled(await openPostgresStore(await createTestDatabase(), { poolSize: 2, connectTimeoutMs: 2000, statementTimeoutMs: 5000, pooling }))
      const memory = await filled(openMemoryStore())
      const ids = [...PLANTS.map((plant) => plant.id), 1n, 9007199254740992n, INT64_MIN + 1n]

      expect(await Promise.all(ids.map((id) => postgres.get(id)))).toEqual(await Promise.all(ids.map((id) => memory.get(id))))
    })
  }

  it('given DATABASE_POOLING=transaction, reading pages and plants leaves no statement prepared under a name', async () => {
    const url = await createTestDatabase()
    await filled(await openPostgresStore(url, { poolSize: 1, connectTimeoutMs: 2000, statementTimeoutMs: 5000 }))
    const connection = await openPostgresConnection(url, { poolSize: 1, connectTimeoutMs: 2000, statementTimeoutMs: 5000, pooling: 'transaction' })
    onTestFinished(() => connection.close())
    const reads = postgresPlantReads(connection, undefined)

    expect((await reads.list({ limit: 2 })).json).toBe('[{"id":-9223372036854775808,"name":"smallest","tag":"x"},{"id":-1,"name":"quote \\" and backslash \\\\","tag":"x"}]')
    expect(await reads.list({ after: 0n, limit: 1, tag: 'x' })).toEqual({ json: '[{"id":8,"name":"Café 🌿","tag":"x"}]', nextAfter: 8n })
    expect(await reads.get(0n)).toBe('{"id":0,"name":"no tag"}')
    // One connection (poolSize 1): whatever the reads prepared under a name would still be there.
    expect((await connection.query({ text: 'SELECT count(*)::int AS named FROM pg_prepared_statements' })).rows).toEqual([{ named: 0 }])
  })

  it('given requests for one page while its statement waits for a connection, they share it, and it holds a plant committed while they waited', async () => {
    const url = await createTestDatabase()
    await filled(await openPostgresStore(url, { poolSize: 1, connectTimeoutMs: 2000, statementTimeoutMs: 5000 }))
    const connection = await openPostgresConnection(url, { poolSize: 1, connectTimeoutMs: 5000, statementTimeoutMs: 5000 })
    onTestFinished(() => connection.close())
    const reads = postgresPlantReads(connection, undefined)
    let release = () => {}
    const held = connection.transaction(() => new Promise<void>((resolve) => { release = resolve }))

    const waiting = [reads.list({ limit: 2 }), reads.list({ limit: 2 }), reads.list({ limit: 2, lines: true }), reads.list({ limit: 2, tag: 'x' })]
    const other = new pg.Client({ connectionString: url })
    await other.connect()
    await other.query('INSERT INTO plants (id, name) VALUES (-5, \'committed while waiting\')')
    await other.end()
    release()
    await held
    const [first, joined, lines, tagged] = await Promise.all(waiting)
    const later = await reads.list({ limit: 2 })

    const expected = '[{"id":-9223372036854775808,"name":"smallest","tag":"x"},{"id":-5,"name":"committed while waiting"}]'
    expect(first).toEqual({ json: expected, nextAfter: -5n })
    expect(joined).toBe(first)
    expect(lines).toEqual({ json: '{"id":-9223372036854775808,"name":"smallest","tag":"x"}\n{"id":-5,"name":"committed while waiting"}\n', nextAfter: -5n })
    expect(tagged).toEqual({ json: '[{"id":-9223372036854775808,"name":"smallest","tag":"x"},{"id":-1,"name":"quote \\" and backslash \\\\","tag":"x"}]', nextAfter: -1n })
    expect(later).toEqual(first)
    expect(later).not.toBe(first)
  })
})
