import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'

const TOKEN = 'shutdown-test-token'

describe('Graceful shutdown under load', () => {
  it('answers every request in flight normally, exits 0 well inside a 10 s grace period, and logs no error', { timeout: 60_000 }, async () => {
    const file = join(temporaryFolder(), 'shutdown.db')
    const env = { DATABASE_URL: `sqlite:${file}`, PLANTSTORE_TOKENS: TOKEN }
    const server = await startServer(env)
    const outcomes: Array<number | string> = []
    const outcomeById = new Map<number, number | string>()
    let signalled = 0
    const requests = Array.from({ length: 300 }, async (_, index) => {
      try {
        const response = await fetch(`${server.baseUrl}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ id: index, name: `in flight ${index}` })
        })
        outcomes.push(response.status)
        outcomeById.set(index, response.status)
        if (outcomes.length === 20) {
          signalled = Date.now()
          process.kill(server.child.pid as number, 'SIGTERM')
        }
        await response.arrayBuffer()
      } catch (error) {
        const code = ((error as Error).cause as { code?: string } | undefined)?.code ?? 'failed'
        outcomes.push(code)
        outcomeById.set(index, code)
      }
    })

    await Promise.all(requests)
    const code = await server.exited
    const stoppedAfterMs = Date.now() - signalled

    expect(code).toBe(0)
    expect(stoppedAfterMs).toBeLessThan(5000)
    expect(server.stdout()).not.toMatch(/"level":(50|60)/)
    expect(server.stdout()).not.toMatch(/closed|not open|SQLITE_MISUSE/i)
    // Each request was answered normally (200, or 503 "shutting down" when it arrived after the drain
    // began) or never reached the service (refused, or reset as the client reused a connection the
    // server was closing): in that case it must not have been stored.
    const unexpected = outcomes.filter((outcome) => ![200, 503, 'ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET'].includes(outcome))
    expect(unexpected).toEqual([])
    expect(outcomes.filter((outcome) => outcome === 200).length).toBeGreaterThanOrEqual(20)
    const restarted = await startServer(env)
    const stored = await fetch(`${restarted.baseUrl}/plants?limit=1000`, { headers: { authorization: `Bearer ${TOKEN}` } })
    const storedIds = ((await stored.json()) as Array<{ id: number }>).map((plant) => plant.id).sort((a, b) => a - b)
    const answeredIds = [...outcomeById].filter(([, outcome]) => outcome === 200).map(([id]) => id).sort((a, b) => a - b)
    expect(storedIds).toEqual(answeredIds)
  })
})
