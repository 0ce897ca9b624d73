import type { LightMyRequestResponse } from 'fastify'
import pg from 'pg'
import { describe, expect, inject, it } from 'vitest'
import { bearer, buildTestApp, TEST_POSTGRES_OPTIONS, TEST_TOKEN } from '../../helpers/app.js'
import { createTestDatabase } from '../../helpers/postgres-database.js'
import { ADMIN_TOKEN, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../../helpers/webhooks.js'
import { openPostgresStore } from '../../../src/store/postgres/store.js'

/** Runs `sql` on the run's PostgreSQL as its administrator. */
async function asAdmin (sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: inject('postgresAdminUrl') })
  await admin.connect()
  try {
    await admin.query(sql)
  } finally {
    await admin.end()
  }
}

const json = { 'content-type': 'application/json' }

function expectUnavailable (response: LightMyRequestResponse, what: string): void {
  expect({ what, status: response.statusCode, retryAfter: response.headers['retry-after'], error: response.json<{ error: number }>().error })
    .toEqual({ what, status: 503, retryAfter: '1', error: 503 })
}

describe('A PostgreSQL database that turns read-only under a running service (a standby, default_transaction_read_only)', () => {
  it('answers every write, /admin ones included, and /readyz with 503 and Retry-After, and writes again once the database does, without a restart', async () => {
    const url = await createTestDatabase()
    const database = new URL(url).pathname.slice(1)
    const app = await buildTestApp({ store: await openPostgresStore(url, TEST_POSTGRES_OPTIONS), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const plantHeaders = { ...bearer(TEST_TOKEN), ...json }
    const adminHeaders = { ...bearer(ADMIN_TOKEN), ...json }
    const writes = (id: number) => ({
      'POST /plants': () => app.inject({ method: 'POST', url: '/plants', headers: plantHeaders, payload: { id, name: `plant ${id}` } }),
      'PUT /plants/1': () => app.inject({ method: 'PUT', url: '/plants/1', headers: plantHeaders, payload: { name: `replaced ${id}` } }),
      'POST /admin/tokens': () => app.inject({ method: 'POST', url: '/admin/tokens', headers: adminHeaders, payload: { name: `ci-${id}`, scopes: ['plants:read'] } }),
      'POST /admin/webhooks': () => app.inject({ method: 'POST', url: '/admin/webhooks', headers: adminHeaders, payload: { url: `http://127.0.0.1:9/hook-${id}` } })
    })
    /** Each write's status; `attempts` > 1 retries a 503, as a client told Retry-After does. */
    const statusesOf = async (id: number, attempts = 1) => {
      const statuses: Record<string, number> = {}
      for (const [name, write] of Object.entries(writes(id))) {
        let status = 0
        for (let attempt = 0; attempt < attempts && (status === 0 || status === 503); attempt++) status = (await write()).statusCode
        statuses[name] = status
      }
      return statuses
    }
    const before = await statusesOf(1)
    const readyBefore = await app.inject({ method: 'GET', url: '/readyz' })

    await asAdmin(`ALTER DATABASE ${database} SET default_transaction_read_only = on`)
    // The setting reaches new sessions: end the pool's, as a failover does.
    await asAdmin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}'`)
    const readOnly: Array<[string, LightMyRequestResponse]> = []
    for (const [name, write] of Object.entries(writes(2))) readOnly.push([name, await write()])
    const readyWhileReadOnly = await app.inject({ method: 'GET', url: '/readyz' })
    const readWhileReadOnly = await app.inject({ method: 'GET', url: '/plants/1', headers: bearer(TEST_TOKEN) })

    // Only new sessions see the reset, and a read keeps a read-only session: writes succeed again once the
    // connections that met it were dropped, each of the pool's at most once.
    await asAdmin(`ALTER DATABASE ${database} RESET default_transaction_read_only`)
    const after = await statusesOf(3, TEST_POSTGRES_OPTIONS.poolSize + 1)
    const readyAfter = await app.inject({ method: 'GET', url: '/readyz' })

    console.log(`while read-only: ${[...readOnly, ['GET /readyz', readyWhileReadOnly] as const].map(([name, response]) => `${name} ${response.statusCode}`).join(', ')}`)
    const created = { 'POST /plants': 200, 'PUT /plants/1': 200, 'POST /admin/tokens': 201, 'POST /admin/webhooks': 201 }
    expect(before).toEqual(created)
    expect(readyBefore.statusCode).toBe(200)
    for (const [name, response] of readOnly) expectUnavailable(response, name)
    expectUnavailable(readyWhileReadOnly, 'GET /readyz')
    expect(readWhileReadOnly.statusCode).toBe(200)
    expect(after).toEqual(created)
    expect(readyAfter.statusCode).toBe(200)
  })
})
