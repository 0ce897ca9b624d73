import { describe, expect, it, onTestFinished } from 'vitest'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.js'
import { spawnServer, startServer } from '../helpers/server-process.js'
import { startWriteLoad, until } from '../helpers/load.js'

const TOKEN = 'immediate-test-token'
const FAST_TIMEOUTS = { DATABASE_CONNECT_TIMEOUT_MS: '1000', DATABASE_STATEMENT_TIMEOUT_MS: '2000' }

async function status (url: string) {
  const started = performance.now()
  const response = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(15_000) })
  return { status: response.status, retryAfter: response.headers.get('retry-after'), ms: performance.now() - started }
}

describe('PostgreSQL stopped with -m immediate mid-load', () => {
  it('gives bounded 503s with Retry-After, never exits, serves again by itself, and loses nothing acknowledged', { timeout: 120_000 }, async () => {
    const postgres = await startEmbeddedPostgres()
    onTestFinished(() => postgres.destroy())
    const server = await startServer({ DATABASE_URL: await createTestDatabase(postgres.adminUrl), PLANTSTORE_TOKENS: TOKEN, ...FAST_TIMEOUTS })
    const load = startWriteLoad(server.baseUrl, TOKEN, { workers: 16, firstId: 1, maxRequests: 100_000 })
    await until(() => load.acknowledged.size >= 200, 20_000, 'writes before the crash')

    // SIGQUIT to the postmaster is PostgreSQL's immediate shutdown (pg_ctl stop -m immediate).
    process.kill(postgres.pid() as number, 'SIGQUIT')
    await until(() => (load.statuses.get(503) ?? 0) >= 20, 20_000, '503s during the outage')
    const duringOutage = await status(`${server.baseUrl}/plants/1`)
    const readyDuringOutage = await status(`${server.baseUrl}/readyz`)
    const liveDuringOutage = await status(`${server.baseUrl}/healthz`)
    await postgres.start()
    const acknowledgedBeforeRecovery = load.acknowledged.size
    await until(() => load.acknowledged.size >= acknowledgedBeforeRecovery + 200, 30_000, 'writes after the restart')
    await load.stop()

    expect(server.child.exitCode).toBeNull()
    expect(duringOutage).toMatchObject({ status: 503, retryAfter: '1' })
    expect(duringOutage.ms).toBeLessThan(5000)
    expect(readyDuringOutage.status).toBe(503)
    expect(liveDuringOutage.status).toBe(200)
    expect([...load.statuses.keys()].sort()).toEqual([200, 503])
    const missing = []
    for (const [id, name] of load.acknowledged) {
      const response = await fetch(`${server.baseUrl}/plants/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })
      if (response.status !== 200 || (await response.json() as { name: string }).name !== name) missing.push(id)
    }
    expect(missing).toEqual([])
  })

  it('a service started while PostgreSQL is down becomes ready by itself once it is up', { timeout: 90_000 }, async () => {
    const postgres = await startEmbeddedPostgres()
    onTestFinished(() => postgres.destroy())
    const databaseUrl = await createTestDatabase(postgres.adminUrl)
    await postgres.stop()

    const server = spawnServer({ DATABASE_URL: databaseUrl, PLANTSTORE_TOKENS: TOKEN, ...FAST_TIMEOUTS })
    await until(() => /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.test(server.stdout()), 20_000, 'the service to listen')
    const baseUrl = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(server.stdout())?.[1] as string
    const notReady = await status(`${baseUrl}/readyz`)
    const refusedWrite = await fetch(`${baseUrl}/plants`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '{"id":1,"name":"Early"}'
    })
    await postgres.start()
    let ready = await status(`${baseUrl}/readyz`)
    for (let attempt = 0; ready.status !== 200 && attempt < 60; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      ready = await status(`${baseUrl}/readyz`)
    }
    const created = await fetch(`${baseUrl}/plants`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '{"id":1,"name":"Early"}'
    })

    expect(notReady.status).toBe(503)
    expect(refusedWrite.status).toBe(503)
    expect(ready.status).toBe(200)
    expect(created.status).toBe(200)
    expect(server.child.exitCode).toBeNull()
  })
})
