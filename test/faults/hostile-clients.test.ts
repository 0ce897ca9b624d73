import { randomBytes } from 'node:crypto'
import { Pool } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { LINGER_MAX_BYTES, LINGER_MAX_MS } from '../../src/http/lingering-close.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { headOf, portOf, uploadTo } from '../helpers/uploads.js'

/** A pool of keep-alive connections to the app, from `localAddress` (any loopback address is ours). */
function poolTo (port: number, localAddress = '127.0.0.1'): Pool {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 8, pipelining: 8, localAddress })
  onTestFinished(() => pool.destroy())
  return pool
}

describe('Hostile clients, at volume', () => {
  it('when an unauthenticated client uploads 50 MB, then it reads its 401 with Connection: close and the server reads a bounded amount, briefly', async () => {
    const app = await buildTestApp()
    await app.listen({ port: 0, host: '127.0.0.1' })

    const outcome = await uploadTo(app, 'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n', 50_000_000)

    console.log(`50 MB unauthenticated upload: the server read ${outcome.serverBytesRead} bytes in ${Math.round(outcome.elapsedMs)} ms; ` +
      `the client wrote ${outcome.bodyBytesWritten} bytes before ${outcome.writing}`)
    const { status, headers } = headOf(outcome.answer)
    expect({ status, connection: headers.connection }).toEqual({ status: 401, connection: 'close' })
    expect(outcome.serverBytesRead).toBeLessThan(LINGER_MAX_BYTES + 1024 * 1024)
    expect(outcome.elapsedMs).toBeLessThan(LINGER_MAX_MS + 1000)
    expect(outcome.writing).toMatch(/^(EPIPE|ECONNRESET)$/)
  })

  it('when one address sends 20,000 random tokens, then it gets 100 401s, then 429s with Retry-After, while a valid token from another address is served', async () => {
    const app = await buildTestApp({ config: { authFailureLimitPerMinute: 100, rateLimitPerMinute: 60 } })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const attacker = poolTo(portOf(app))
    const client = poolTo(portOf(app), '127.0.0.2')

    const startedAt = performance.now()
    const answers = await Promise.all(Array.from({ length: 20_000 }, async () => {
      const response = await attacker.request({ method: 'GET', path: '/plants/1', headers: bearer(randomBytes(24).toString('base64url')) })
      await response.body.dump()
      return { status: response.statusCode, retryAfter: response.headers['retry-after'] }
    }))
    const elapsedMs = performance.now() - startedAt
    const served = await client.request({ method: 'GET', path: '/plants', headers: bearer() })
    await served.body.dump()
    const validFromAttacker = await attacker.request({ method: 'GET', path: '/plants', headers: bearer() })
    await validFromAttacker.body.dump()

    const counts = Object.fromEntries([401, 429].map((status) => [status, answers.filter((answer) => answer.status === status).length]))
    console.log(`20,000 random tokens in ${Math.round(elapsedMs)} ms: ${JSON.stringify(counts)}`)
    expect(counts).toEqual({ 401: 100, 429: 19_900 })
    const retryAfters = new Set(answers.filter((answer) => answer.status === 429).map((answer) => Number(answer.retryAfter)))
    expect(Math.min(...retryAfters)).toBeGreaterThanOrEqual(1)
    expect(Math.max(...retryAfters)).toBeLessThanOrEqual(60)
    expect(served.statusCode).toBe(200)
    expect(validFromAttacker.statusCode).toBe(429)
  })
})
