/**
 * What the service says about its own life, as an operator reads it: a JSON line when it is ready, a
 * bounded number of lines while the database it needs cannot be reached, and a last line when it stopped.
 */
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { temporaryFolder } from './helpers/app.js'
import { createTestDatabase } from './helpers/postgres-database.js'
import { spawnServer, startServer } from './helpers/server-process.js'
import { startTcpProxy } from './helpers/tcp-proxy.js'

const TOKEN = 'lifecycle-test-token'

interface LogLine { readonly level: number, readonly msg: string, readonly [key: string]: unknown }

function logLines (stdout: string): LogLine[] {
  return stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as LogLine)
}

const messages = (stdout: string) => logLines(stdout).map((line) => line.msg)

/** A PostgreSQL database reached through a proxy that refuses every connection until `pass()`. */
async function unreachablePostgres () {
  const url = new URL(await createTestDatabase())
  const proxy = await startTcpProxy(Number(url.port))
  onTestFinished(() => proxy.close())
  proxy.reset()
  url.port = String(proxy.port)
  return { url: url.toString(), proxy }
}

describe('The service as an operator reads its log', () => {
  it('says once that it is ready, with its address and store, and writes "stopped" as its last line after SIGTERM', async () => {
    const server = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'ready.db')}`, PLANTSTORE_TOKENS: TOKEN })
    await expect.poll(() => messages(server.stdout()), { timeout: 5000 }).toContain(`ready: serving ${server.baseUrl}`)
    const ready = logLines(server.stdout()).find((line) => line.msg.startsWith('ready:'))
    expect(ready).toMatchObject({ level: 30, address: server.baseUrl, store: 'sqlite' })

    process.kill(server.child.pid as number, 'SIGTERM')

    expect(await server.exited).toBe(0)
    const last = logLines(server.stdout()).at(-1)
    expect(last).toMatchObject({ level: 30, msg: 'stopped', signal: 'SIGTERM', seconds: expect.any(Number) })
    expect(messages(server.stdout()).filter((message) => message.startsWith('ready:'))).toHaveLength(1)
  })

  it('while PostgreSQL cannot be reached at its first start, logs the wait once (not every second), then that the database answers, then that it is ready', async () => {
    const { url, proxy } = await unreachablePostgres()
    const server = spawnServer({ DATABASE_URL: url, DATABASE_CONNECT_TIMEOUT_MS: '1000' })
    await expect.poll(() => messages(server.stdout()).filter((message) => message.startsWith('waiting for the database')), { timeout: 10_000 }).toHaveLength(1)
    const waitingSince = performance.now()
    await expect.poll(() => performance.now() - waitingSince, { timeout: 5000, interval: 250 }).toBeGreaterThan(3000)
    expect(messages(server.stdout()).filter((message) => message.startsWith('waiting for the database'))).toHaveLength(1)
    expect(logLines(server.stdout()).find((line) => line.msg.startsWith('waiting'))?.level).toBe(40)
    expect(server.stderr()).not.toContain('waiting for the database')

    proxy.pass()

    await expect.poll(() => messages(server.stdout()).find((message) => message.startsWith('ready: serving')), { timeout: 10_000 }).toBeDefined()
    const order = messages(server.stdout())
    expect(order.indexOf('the database answers')).toBeGreaterThan(-1)
    expect(order.indexOf('the database answers')).toBeLessThan(order.findIndex((message) => message.startsWith('ready: serving')))
  })

  it('with PLANTSTORE_TOKENS, starts while PostgreSQL cannot be reached, says it is not ready yet, and says so once it is', async () => {
    const { url, proxy } = await unreachablePostgres()
    const server = await startServer({ DATABASE_URL: url, PLANTSTORE_TOKENS: TOKEN, DATABASE_CONNECT_TIMEOUT_MS: '1000' })
    await expect.poll(() => messages(server.stdout()).find((message) => message.startsWith(`listening at ${server.baseUrl}, but not ready`)),
      { timeout: 10_000 }).toBeDefined()
    expect((await fetch(`${server.baseUrl}/readyz`)).status).toBe(503)

    proxy.pass()

    await expect.poll(() => messages(server.stdout()).find((message) => message === `ready: serving ${server.baseUrl}`), { timeout: 10_000 }).toBeDefined()
    expect((await fetch(`${server.baseUrl}/readyz`)).status).toBe(200)
  })
})
