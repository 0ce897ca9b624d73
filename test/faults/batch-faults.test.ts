/**
 * Batches through the faults a durable store must survive: `kill -9` while batches of a thousand
 * operations stream in (every batch afterwards whole or absent, every acknowledged one whole), and the
 * database lost in the middle of a batch's transaction (a 503, nothing applied).
 */
import { join } from 'node:path'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { until } from '../helpers/load.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import { holdWriteLock } from '../helpers/sqlite-lock-holder.js'
import { startTcpProxy } from '../helpers/tcp-proxy.js'

const TOKEN = 'batch-fault-token'
const OPERATIONS = 1000
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }

/** A batch the test sent: what it writes, and whether its 200 came back. */
interface SentBatch {
  readonly first: number
  readonly kind: 'create' | 'retag'
  readonly tag: string
  acknowledged: boolean
}

/** Batch `n` creates the plants first … first + 999, tagged `b<n>`; its retag sets `r<n>` on the plants of an earlier one. */
function operationsOf (batch: SentBatch): unknown[] {
  return Array.from({ length: OPERATIONS }, (_, offset) => batch.kind === 'create'
    ? { method: 'POST', body: { id: batch.first + offset, name: `plant ${batch.first + offset}`, tag: batch.tag } }
    : { method: 'PATCH', id: batch.first + offset, body: { tag: batch.tag } })
}

async function tagsOf (baseUrl: string, first: number): Promise<string[]> {
  const response = await fetch(`${baseUrl}/plants?after=${first - 1}&limit=${OPERATIONS}`, { headers })
  expect(response.status).toBe(200)
  return (await response.json() as Array<{ id: number, tag: string }>).filter((plant) => plant.id < first + OPERATIONS).map((plant) => plant.tag)
}

describe.each([
  { name: 'sqlite', databaseUrl: async () => `sqlite:${join(temporaryFolder(), 'batches.db')}` },
  { name: 'postgres', databaseUrl: createTestDatabase }
])('kill -9 while batches of 1000 operations stream in, on $name', ({ databaseUrl }) => {
  it('leaves every batch whole or absent, and every acknowledged one whole, over 2 rounds', { timeout: 180_000 }, async () => {
    const env = { DATABASE_URL: await databaseUrl(), PLANTSTORE_TOKENS: TOKEN }
    const sent: SentBatch[] = []
    for (let round = 0; round < 2; round++) {
      const server = await startServer(env)
      const killAfter = 4 + round * 3
      let acknowledged = 0
      let stopped = false
      const workers = Array.from({ length: 3 }, async () => {
        while (!stopped) {
          const created = sent.filter((batch) => batch.kind === 'create' && batch.acknowledged)
          // Every third batch retags all the plants of an acknowledged one, the rest create new plants.
          const batch: SentBatch = sent.length % 3 === 2 && created.length > 0
            ? { first: (created[sent.length % created.length] as SentBatch).first, kind: 'retag', tag: `r${sent.length}`, acknowledged: false }
            : { first: sent.length * OPERATIONS, kind: 'create', tag: `b${sent.length}`, acknowledged: false }
          sent.push(batch)
          try {
            const response = await fetch(`${server.baseUrl}/plants/batch`, { method: 'POST', headers, body: JSON.stringify({ operations: operationsOf(batch) }) })
            if (response.status === 200) {
              batch.acknowledged = true
              if (++acknowledged === killAfter) process.kill(server.child.pid as number, 'SIGKILL')
            } else {
              expect(response.status).toBe(503)
            }
          } catch {
            stopped = true
          }
        }
      })
      await until(() => server.child.exitCode !== null || server.child.signalCode !== null, 60_000, 'the kill')
      stopped = true
      await server.exited
      await Promise.all(workers)
    }

    const survivor = await startServer(env)
    const findings: string[] = []
    for (const batch of sent) {
      const tags = await tagsOf(survivor.baseUrl, batch.first)
      const mine = tags.filter((tag) => tag === batch.tag).length
      if (batch.kind === 'create' && tags.length !== 0 && tags.length !== OPERATIONS) findings.push(`${batch.tag}: ${tags.length} of ${OPERATIONS} plants`)
      if (mine !== 0 && mine !== OPERATIONS) findings.push(`${batch.tag}: ${mine} of ${OPERATIONS} plants tagged`)
      const later = sent.filter((other) => other.kind === 'retag' && other.first === batch.first && sent.indexOf(other) > sent.indexOf(batch))
      if (batch.acknowledged && mine !== OPERATIONS && later.length === 0) findings.push(`${batch.tag}: acknowledged, but ${mine} plants tagged`)
    }

    expect(sent.filter((batch) => batch.acknowledged).length).toBeGreaterThanOrEqual(10)
    expect(sent.some((batch) => !batch.acknowledged)).toBe(true)
    expect(findings).toEqual([])
  })
})

describe('The database lost in the middle of a batch', () => {
  it('on PostgreSQL (the connection reset inside the batch\'s transaction): a 503, and nothing of the batch applied', { timeout: 60_000 }, async () => {
    const url = new URL(await createTestDatabase())
    const proxy = await startTcpProxy(Number(url.port))
    onTestFinished(() => proxy.close())
    const watcher = new pg.Client({ connectionString: url.toString() })
    await watcher.connect()
    onTestFinished(() => watcher.end())
    url.port = String(proxy.port)
    const server = await startServer({ DATABASE_URL: url.toString(), PLANTSTORE_TOKENS: TOKEN })
    expect((await fetch(`${server.baseUrl}/plants`, { method: 'POST', headers, body: '{"id":1,"name":"before"}' })).status).toBe(200)

    // Each round trip takes 150 ms: the batch's transaction stays open long enough to be seen and cut.
    proxy.delay(150)
    const answer = fetch(`${server.baseUrl}/plants/batch`, { method: 'POST', headers, body: JSON.stringify({ operations: operationsOf({ first: 100, kind: 'create', tag: 'cut', acknowledged: false }) }) })
    for (let polls = 0; ; polls++) {
      const { rows } = await watcher.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'plantstore' AND backend_xid IS NOT NULL")
      if (rows.length > 0) break
      expect(polls).toBeLessThan(2000)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    proxy.reset()
    const response = await answer
    proxy.pass()

    expect({ status: response.status, retryAfter: response.headers.get('retry-after') }).toEqual({ status: 503, retryAfter: '1' })
    const stored = await watcher.query('SELECT count(*) AS count FROM plants WHERE id >= 100')
    expect(stored.rows[0]).toEqual({ count: '0' })
    expect(await (await fetch(`${server.baseUrl}/plants/1`, { headers })).text()).toBe('{"id":1,"name":"before"}')
  })

  it('on SQLite (its write lock held by another process): a 503 at once, nothing applied, and the batch applies once it is free', { timeout: 30_000 }, async () => {
    const file = join(temporaryFolder(), 'locked.db')
    const server = await startServer({ DATABASE_URL: `sqlite:${file}`, PLANTSTORE_TOKENS: TOKEN })
    const send = () => fetch(`${server.baseUrl}/plants/batch`, { method: 'POST', headers, body: JSON.stringify({ operations: operationsOf({ first: 100, kind: 'create', tag: 'locked', acknowledged: false }) }) })
    const { released } = await holdWriteLock(file, 2000)

    const whileLocked = await send()
    const during = await tagsOf(server.baseUrl, 100)
    await released
    const afterwards = await send()

    expect({ status: whileLocked.status, retryAfter: whileLocked.headers.get('retry-after') }).toEqual({ status: 503, retryAfter: '1' })
    expect(during).toEqual([])
    expect(afterwards.status).toBe(200)
    expect(await tagsOf(server.baseUrl, 100)).toEqual(Array.from({ length: OPERATIONS }, () => 'locked'))
  })
})
