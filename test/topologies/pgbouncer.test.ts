import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { startPgBouncer, type PgBouncer } from '../../scripts/topologies/pgbouncer.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'

const ADMIN = 'pgbouncer-admin-token'
const WRITER = 'pgbouncer-writer-token'
const STATEMENT_TIMEOUT_MS = 1000
/** The token poll of src/server.ts (1 s) and the time its read takes: how soon a revocation reaches an instance without LISTEN. */
const REVOCATION_BOUND_MS = 2000
/** Fixed ports of this file (15450-15499): one pooler per mode. */
const PORTS = { session: 15450, transaction: 15451 } as const

const poolers: PgBouncer[] = []
afterAll(async () => {
  for (const pooler of poolers) await pooler.stop()
})

function call (baseUrl: string, method: string, path: string, token: string, body?: unknown) {
  return fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(15_000)
  })
}

/** Milliseconds until `request` answers `status`, asked every 20 ms; Infinity when it has not after 5 s. */
async function msUntil (status: number, request: () => Promise<number>): Promise<number> {
  const started = performance.now()
  while (performance.now() - started < 5000) {
    if (await request() === status) return performance.now() - started
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return Number.POSITIVE_INFINITY
}

function tally (statuses: readonly number[]): Record<number, number> {
  const counts: Record<number, number> = {}
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
  return counts
}

describe.each([
  // Session mode needs no setting at all: nothing is sent as a startup parameter.
  { mode: 'session', env: {} },
  { mode: 'transaction', env: { DATABASE_POOLING: 'transaction' } }
] as const)('PgBouncer 1.18 in $mode mode, with its default settings, in front of PostgreSQL', ({ mode, env }) => {
  it('serves plants, tokens and webhooks, and a write on a locked row is a 503 within the statement timeout + 1 s that leaves nothing waiting', async () => {
    const databaseUrl = await createTestDatabase()
    const pooler = await startPgBouncer(databaseUrl, PORTS[mode], mode)
    poolers.push(pooler)
    const serverEnv = {
      DATABASE_URL: pooler.url,
      DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      PLANTSTORE_TOKENS: `name=admin;scopes=admin;${ADMIN},name=writer;scopes=plants:read+plants:write;${WRITER}`,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      ...env
    }
    const { baseUrl } = await startServer(serverEnv)
    // A second instance on the same database, which hears of token changes only through the database.
    const other = await startServer({ ...serverEnv, WEBHOOK_DELIVERY: 'false' })

    // The plant operations, one by one.
    const created = await call(baseUrl, 'POST', '/plants', WRITER, { id: 1, name: 'Fern', tag: 'indoor' })
    expect(created.status, await created.clone().text()).toBe(200)
    expect(await (await call(baseUrl, 'GET', '/plants/1', WRITER)).json()).toEqual({ id: 1, name: 'Fern', tag: 'indoor' })
    expect((await call(baseUrl, 'PUT', '/plants/1', WRITER, { name: 'Maidenhair fern' })).status).toBe(200)
    expect(await (await call(baseUrl, 'GET', '/plants', WRITER)).json()).toEqual([{ id: 1, name: 'Maidenhair fern' }])
    expect((await call(baseUrl, 'DELETE', '/plants/1', WRITER)).status).toBe(204)
    expect((await call(baseUrl, 'GET', '/plants/1', WRITER)).status).toBe(404)

    // Many at once: the pool's connections meet several server connections, where a statement
    // prepared under a name on one is unknown on the others.
    const ids = Array.from({ length: 200 }, (_, index) => 100 + index)
    const writes = await Promise.all(ids.map(async (id) => (await call(baseUrl, 'POST', '/plants', WRITER, { id, name: `Plant ${id}` })).status))
    const reads = await Promise.all(ids.map(async (id) => (await call(baseUrl, 'GET', `/plants/${id}`, WRITER)).status))
    const changes = await Promise.all(ids.map(async (id) => (await call(baseUrl, 'PUT', `/plants/${id}`, WRITER, { name: `Plant ${id}`, tag: 'b' })).status))
    expect({ writes: tally(writes), reads: tally(reads), changes: tally(changes) }).toEqual({ writes: { 200: 200 }, reads: { 200: 200 }, changes: { 200: 200 } })
    expect((await call(baseUrl, 'GET', '/readyz', ADMIN)).status).toBe(200)

    // A token made on one instance is used on the other, then revoked on the first: the other
    // refuses it within the bound (LISTEN in session mode, the revision poll in transaction mode).
    const made = await call(baseUrl, 'POST', '/admin/tokens', ADMIN, { name: 'reader', scopes: ['plants:read'] })
    expect(made.status).toBe(201)
    const reader = await made.json() as { id: string, token: string }
    const readOnOther = async () => (await call(other.baseUrl, 'GET', '/plants/100', reader.token)).status
    expect(await msUntil(200, readOnOther), 'ms until the other instance accepts the new token').toBeLessThan(REVOCATION_BOUND_MS)
    expect((await call(baseUrl, 'DELETE', `/admin/tokens/${reader.id}`, ADMIN)).status).toBe(204)
    expect(await msUntil(401, readOnOther), 'ms until the other instance refuses the revoked token').toBeLessThan(REVOCATION_BOUND_MS)
    expect((await call(baseUrl, 'GET', '/plants/100', reader.token)).status).toBe(401)

    // A webhook subscription and a delivery.
    const receiver = await WebhookReceiver.start()
    const subscribed = await call(baseUrl, 'POST', '/admin/webhooks', ADMIN, { url: receiver.url, events: ['plant.created'] })
    expect(subscribed.status).toBe(201)
    receiver.useSecret((await subscribed.json() as { secret: string }).secret)
    expect((await call(baseUrl, 'POST', '/plants', WRITER, { id: 2, name: 'Calathea' })).status).toBe(200)
    const [delivery] = await receiver.waitForDeliveries(1)
    expect({ type: delivery?.type, verified: delivery?.verified, body: delivery?.body })
      .toEqual({ type: 'plant.created', verified: true, body: '{"id":2,"name":"Calathea"}' })

    // A row locked by another session, straight on PostgreSQL.
    const locker = new pg.Client({ connectionString: databaseUrl })
    await locker.connect()
    try {
      await locker.query('BEGIN')
      await locker.query('SELECT * FROM plants WHERE id = 100 FOR UPDATE')
      const started = performance.now()
      const blocked = await call(baseUrl, 'PUT', '/plants/100', WRITER, { name: 'Blocked' })
      const elapsedMs = performance.now() - started
      expect({ status: blocked.status, retryAfter: blocked.headers.get('retry-after') }).toEqual({ status: 503, retryAfter: '1' })
      expect(elapsedMs).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS - 50)
      expect(elapsedMs).toBeLessThan(STATEMENT_TIMEOUT_MS + 1000)
      const database = new URL(databaseUrl).pathname.slice(1)
      const waiting = await locker.query<{ query: string }>(
        'SELECT query FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = \'Lock\'', [database])
      const ungranted = await locker.query('SELECT 1 FROM pg_locks WHERE NOT granted')
      expect({ waiting: waiting.rows, ungranted: ungranted.rowCount }).toEqual({ waiting: [], ungranted: 0 })
    } finally {
      await locker.query('ROLLBACK')
      await locker.end()
    }
    expect((await call(baseUrl, 'PUT', '/plants/100', WRITER, { name: 'Unblocked' })).status).toBe(200)
    expect(await (await call(baseUrl, 'GET', '/plants/100', WRITER)).json()).toEqual({ id: 100, name: 'Unblocked' })
  })
})
