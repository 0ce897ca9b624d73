import { describe, expect, it, onTestFinished } from 'vitest'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import { startTcpProxy } from '../helpers/tcp-proxy.js'

const TOKEN = 'hung-connection-token'
/** The documented bound of a write: DATABASE_STATEMENT_TIMEOUT_MS (5000, the default) + 1 s. */
const BOUND_MS = 6000
/** Scheduling on a shared test machine. */
const SLACK_MS = 700

interface Answer { readonly status: number, readonly retryAfter: string | null, readonly body: unknown, readonly ms: number }

async function create (baseUrl: string, id: number): Promise<Answer> {
  const started = performance.now()
  const response = await fetch(`${baseUrl}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, name: `plant ${id}` }),
    signal: AbortSignal.timeout(30_000)
  })
  const body: unknown = await response.json()
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body, ms: performance.now() - started }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('PostgreSQL behind a connection that hangs (the network stops forwarding, sockets stay open)', () => {
  it('answers the write on the hung connection and the writes queued behind it 503 with Retry-After within the statement timeout + 1 s, then serves again by itself and loses nothing acknowledged', { timeout: 90_000 }, async () => {
    const databaseUrl = new URL(await createTestDatabase())
    const proxy = await startTcpProxy(Number(databaseUrl.port))
    onTestFinished(() => proxy.close())
    databaseUrl.port = String(proxy.port)
    const server = await startServer({ DATABASE_URL: databaseUrl.toString(), PLANTSTORE_TOKENS: TOKEN })
    const acknowledged = new Set<number>()
    for (let id = 1; id <= 20; id++) if ((await create(server.baseUrl, id)).status === 200) acknowledged.add(id)

    proxy.hold()
    const first = create(server.baseUrl, 100)
    await sleep(300)
    const queued = await Promise.all([101, 102, 103, 104, 105].map((id) => create(server.baseUrl, id)))
    const held = [await first, ...queued]
    proxy.pass()

    let recovered: Answer | undefined
    for (let id = 200; id < 260 && recovered?.status !== 200; id++) {
      recovered = await create(server.baseUrl, id)
      if (recovered.status === 200) acknowledged.add(id)
      else await sleep(250)
    }
    for (let id = 300; id < 320; id++) if ((await create(server.baseUrl, id)).status === 200) acknowledged.add(id)
    const missing = []
    for (const id of acknowledged) {
      const response = await fetch(`${server.baseUrl}/plants/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })
      if (response.status !== 200) missing.push(id)
    }

    console.log(`writes on a held connection answered in ${held.map((answer) => `${answer.status} ${Math.round(answer.ms)} ms`).join(', ')}`)
    for (const answer of held) {
      expect(answer).toMatchObject({ status: 503, retryAfter: '1', body: { error: 503 } })
      expect(answer.ms).toBeLessThanOrEqual(BOUND_MS + SLACK_MS)
    }
    expect(recovered?.status).toBe(200)
    expect(acknowledged.size).toBeGreaterThanOrEqual(41)
    expect(missing).toEqual([])
    expect(server.child.exitCode).toBeNull()
  })
})
