import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '../helpers/load.js'
import { startServer } from '../helpers/server-process.js'
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js'
import { createCluster, type Cluster, type PostgresServer } from './helpers/postgres-cluster.js'

// Fixed ports outside the ephemeral range (a reconnecting client could otherwise connect to itself).
const PRIMARY_PORT = 15410
const STANDBY_PORT = 15411
/** The one address the service knows: a DNS name or a virtual IP in production. */
const ADDRESS_PORT = 15412
const TOKEN = 'failover-test-token'
const TIMEOUTS = { DATABASE_CONNECT_TIMEOUT_MS: '1000', DATABASE_STATEMENT_TIMEOUT_MS: '2000' }
/** The longest a write may take: a connection (1 s), then a statement and the client's extra second (3 s), and scheduling slack. */
const WRITE_BOUND_MS = 5000

interface WriteAnswer { readonly id: number, readonly status: number | 'no answer', readonly retryAfter: string | null, readonly ms: number }

/** `workers` loops of sequential creates until stopped, every answer and its time kept. */
function writeLoad (baseUrl: string, workers: number) {
  const answers: WriteAnswer[] = []
  let nextId = 1
  const state = { stopped: false }
  const worker = async () => {
    while (!state.stopped) {
      const id = nextId++
      const started = performance.now()
      try {
        const response = await fetch(`${baseUrl}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ id, name: `plant ${id}` }),
          signal: AbortSignal.timeout(30_000)
        })
        await response.arrayBuffer()
        answers.push({ id, status: response.status, retryAfter: response.headers.get('retry-after'), ms: performance.now() - started })
        if (response.status !== 200) await new Promise((resolve) => setTimeout(resolve, 50))
      } catch {
        answers.push({ id, status: 'no answer', retryAfter: null, ms: performance.now() - started })
      }
    }
  }
  const running = Array.from({ length: workers }, worker)
  const count = (status: number) => answers.filter((answer) => answer.status === status).length
  return { answers, count, stop: async () => { state.stopped = true; await Promise.all(running) } }
}

describe('A failover: the primary stopped, a synchronous standby promoted, the one address moved to it', () => {
  let cluster: Cluster
  let primary: PostgresServer
  let standby: PostgresServer
  let address: TcpProxy

  beforeAll(async () => {
    cluster = createCluster()
    primary = await cluster.primary('primary', PRIMARY_PORT, { synchronous_standby_names: 'standby', synchronous_commit: 'on' })
    standby = await cluster.standby(primary, 'standby', STANDBY_PORT)
    const deadline = Date.now() + 30_000
    while ((await primary.query<{ state: string }>('SELECT sync_state AS state FROM pg_stat_replication'))[0]?.state !== 'sync') {
      if (Date.now() > deadline) throw new Error('the standby did not become synchronous')
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    await primary.query('CREATE DATABASE plantstore')
    address = await startTcpProxy(PRIMARY_PORT, ADDRESS_PORT)
  })

  afterAll(async () => {
    await address?.close()
    await cluster?.removeAll()
  })

  it('answers 503 with Retry-After meanwhile, never hangs, writes again by itself and loses no acknowledged write', { timeout: 120_000 }, async () => {
    const server = await startServer({ DATABASE_URL: `postgres://postgres@127.0.0.1:${ADDRESS_PORT}/plantstore`, PLANTSTORE_TOKENS: TOKEN, ...TIMEOUTS })
    const load = writeLoad(server.baseUrl, 8)
    await until(() => load.count(200) >= 300, 30_000, 'writes before the failover')

    // The primary's host vanishes: its connections go silent (no FIN, no RST), and its server is gone.
    address.freezeOpen()
    await primary.stopImmediately()
    const failedAt = load.answers.length
    // The address moves first, as a DNS record or a virtual IP may: for a moment it leads to a standby still in recovery.
    address.retarget(STANDBY_PORT)
    await until(() => load.count(503) >= 20, 20_000, '503s during the failover')
    const readyBeforePromotion = (await fetch(`${server.baseUrl}/readyz`, { signal: AbortSignal.timeout(10_000) })).status
    await standby.promote()
    const promotedAt = load.answers.length
    await until(() => load.answers.slice(promotedAt).filter((answer) => answer.status === 200).length >= 300, 30_000, 'writes after the promotion')
    await load.stop()

    const acknowledged = load.answers.filter((answer) => answer.status === 200).map((answer) => answer.id)
    const stored = new Set((await standby.query<{ id: string }>('SELECT id::text FROM plants', [], 'plantstore')).map((row) => Number(row.id)))
    const lost = acknowledged.filter((id) => !stored.has(id))
    const statuses = new Set(load.answers.map((answer) => answer.status))
    const slowest = Math.max(...load.answers.map((answer) => answer.ms))
    const unavailable = load.answers.filter((answer) => answer.status === 503)
    console.log(`failover: ${acknowledged.length} writes acknowledged, ${unavailable.length} answered 503 (from answer ${failedAt} on), ` +
      `slowest answer ${Math.round(slowest)} ms, ${lost.length} acknowledged writes lost`)

    expect([...statuses].sort()).toEqual([200, 503])
    expect(readyBeforePromotion).toBe(503)
    expect(unavailable.every((answer) => answer.retryAfter === '1')).toBe(true)
    expect(slowest).toBeLessThanOrEqual(WRITE_BOUND_MS)
    expect(lost).toEqual([])
    expect(server.child.exitCode).toBeNull()
  })
})
