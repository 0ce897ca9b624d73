import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { startServer } from './server-process.js'

const TOKEN = 'server-process-helper-token-5e2a'

/**
 * Lets the service run 5 ms in every 305 for `ms` (SIGSTOP and SIGCONT, as a machine too busy to
 * schedule it would), then answers GET /plants sent right then: the event loop's delay, as the
 * service samples it, is then about 300 ms.
 */
async function afterStarvation (server: Awaited<ReturnType<typeof startServer>>, ms: number): Promise<number> {
  const pid = server.child.pid as number
  const until = performance.now() + ms
  while (performance.now() < until) {
    process.kill(pid, 'SIGSTOP')
    try {
      await sleep(300)
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    await sleep(5)
  }
  const response = await fetch(`${server.baseUrl}/plants`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(5000) })
  await response.arrayBuffer()
  return response.status
}

// The service's start-up grace, after which the event-loop signal judges requests (src/http/load-shedding.ts).
const GRACE_MS = 2000

describe('A service a test starts (startServer)', () => {
  it('does not shed load when the machine stalls it, unless the test turns shedding on', { timeout: 30_000 }, async () => {
    const env = { DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: TOKEN }
    const [quiet, shedding] = await Promise.all([startServer(env), startServer({ ...env, SHED_EVENT_LOOP_DELAY_MS: '200' })])
    await sleep(GRACE_MS + 300)

    const statuses = { quiet: [] as number[], shedding: [] as number[] }
    for (let round = 0; round < 2; round++) {
      const [quietStatus, sheddingStatus] = await Promise.all([afterStarvation(quiet, 1000), afterStarvation(shedding, 1000)])
      statuses.quiet.push(quietStatus)
      statuses.shedding.push(sheddingStatus)
    }

    // The control: with the production default (200 ms), a starved second makes the service shed.
    expect(statuses.shedding).toContain(503)
    expect(statuses.quiet).toEqual([200, 200])
  })
})
