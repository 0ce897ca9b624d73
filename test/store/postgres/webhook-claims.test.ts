import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import { openPostgresStore } from '../../../src/store/postgres/store.js'
import { WEBHOOK_EVENT_TYPES } from '../../../src/store/webhook-store.js'
import { newSigningSecret } from '../../../src/webhooks/secrets.js'
import { TEST_POSTGRES_OPTIONS } from '../../helpers/app.js'
import { createTestDatabase } from '../../helpers/postgres-database.js'

const PLANTS = 1500

async function query (url: string, text: string, values: unknown[] = []): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(text, values)
  } finally {
    await client.end()
  }
}

describe('the PostgreSQL claim', () => {
  it('on an outbox filled faster than its statistics follow (never analyzed), leases the oldest event of each plant in milliseconds', async () => {
    const url = await createTestDatabase()
    const store = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
    onTestFinished(() => store.close())
    // As between two autovacuum runs: the planner knows nothing of the rows below.
    await query(url, 'ALTER TABLE webhook_outbox SET (autovacuum_enabled = false)')
    const subscriptionId = randomUUID()
    await store.webhooks.createSubscription({
      id: subscriptionId, url: 'http://127.0.0.1:9/hooks', events: [...WEBHOOK_EVENT_TYPES], createdAt: 1000, storedSecret: newSigningSecret()
    })
    // Two events per plant, the created one first: 3,000 rows, all due.
    await query(url, `INSERT INTO webhook_outbox (subscription_id, event_id, event_type, plant_id, body, created_at, next_attempt_at)
      SELECT $1, 'msg_' || plant || '_' || step, CASE step WHEN 1 THEN 'plant.created' ELSE 'plant.updated' END, plant, '{}', 1000, 1000
      FROM generate_series(1, $2::int) plant, generate_series(1, 2) step ORDER BY plant, step`, [subscriptionId, PLANTS])

    const claims: { plants: number[], types: string[], ms: number }[] = []
    for (let round = 0; round < 5; round++) {
      const started = performance.now()
      const claimed = await store.webhooks.claim({ owner: 'a', now: 2000, leaseMs: 60_000, limit: 32, perSubscription: 16 })
      claims.push({ plants: claimed.map((delivery) => Number(delivery.plantId)), types: claimed.map((delivery) => delivery.type), ms: performance.now() - started })
    }

    expect(claims.map(({ plants }) => plants)).toEqual(Array.from({ length: 5 }, (_, round) => Array.from({ length: 16 }, (_, index) => round * 16 + index + 1)))
    expect(claims.flatMap(({ types }) => types)).toEqual(Array(80).fill('plant.created'))
    // Each pending row compared with every other (release 1.6's first plan) took 1-3 s per claim here.
    expect(claims.filter(({ ms }) => ms > 250)).toEqual([])
  })
})
