import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { holdWriteLock } from '../helpers/sqlite-lock-holder.js'

const TOKEN = 'lock-test-token'

describe('The SQLite write lock held by another process', () => {
  it('gets 503s with Retry-After quickly, no hang (liveness answers), and success once it is released', { timeout: 30_000 }, async () => {
    const file = join(temporaryFolder(), 'locked.db')
    const server = await startServer({ DATABASE_URL: `sqlite:${file}`, PLANTSTORE_TOKENS: TOKEN })
    const post = async (id: number) => {
      const started = performance.now()
      const response = await fetch(`${server.baseUrl}/plants`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ id, name: 'locked' })
      })
      return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.json() as unknown, ms: performance.now() - started }
    }
    // Another process takes the write lock and keeps it for 3 s (longer than the 250 ms busy_timeout).
    const { released } = await holdWriteLock(file, 3000)

    const whileLocked = await Promise.all([1, 2, 3].map(post))
    const liveness = await fetch(`${server.baseUrl}/healthz`)
    await released
    const afterwards = await post(1)

    for (const answer of whileLocked) {
      expect(answer).toMatchObject({ status: 503, retryAfter: '1', body: { error: 503 } })
      expect(answer.ms).toBeLessThan(2000)
    }
    expect(liveness.status).toBe(200)
    expect(afterwards).toMatchObject({ status: 200, body: { name: 'locked' } })
  })
})
