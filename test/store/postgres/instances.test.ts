import { describe, expect, it } from 'vitest'
import { createTestDatabase } from '../../helpers/postgres-database.js'
import { startServer } from '../../helpers/server-process.js'

const TOKEN = 'instances-test-token'
const HEADERS = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }

async function post (baseUrl: string, body: { id: number, name: string }) {
  const response = await fetch(`${baseUrl}/plants`, { method: 'POST', headers: HEADERS, body: JSON.stringify(body) })
  return { status: response.status, body: await response.json() as Record<string, unknown>, name: body.name }
}

describe('Three service instances on one PostgreSQL database', () => {
  it('migrate concurrently, give each id exactly one winner under racing creates, and agree afterwards', async () => {
    const databaseUrl = await createTestDatabase()
    const env = { DATABASE_URL: databaseUrl, PLANTSTORE_TOKENS: TOKEN, DATABASE_POOL_SIZE: '5' }
    const instances = await Promise.all([startServer(env), startServer(env), startServer(env)])
    const ids = Array.from({ length: 30 }, (_, index) => 5000 + index)

    const answers = await Promise.all(ids.flatMap((id) => instances.flatMap((instance, instanceIndex) =>
      [0, 1].map((attempt) => post(instance.baseUrl, { id, name: `plant-${id}-${(instanceIndex + attempt) % 3}` })))))

    for (const id of ids) {
      const forId = answers.slice((id - 5000) * 6, (id - 5000) * 6 + 6)
      const winners = new Set(forId.filter((answer) => answer.status === 200).map((answer) => answer.body.name))
      expect(winners.size).toBe(1)
      const winner = [...winners][0]
      for (const answer of forId) {
        if (answer.name === winner) {
          expect(answer).toMatchObject({ status: 200, body: { name: winner } })
        } else {
          expect(answer).toMatchObject({ status: 409, body: { error: 409, message: `plant ${id} already exists with a different name or tag` } })
        }
      }
      const afterwards = await Promise.all(instances.flatMap((instance) => [
        post(instance.baseUrl, { id, name: String(winner) }),
        post(instance.baseUrl, { id, name: 'a latecomer' })
      ]))
      expect(afterwards.map((answer) => answer.status)).toEqual([200, 409, 200, 409, 200, 409])
    }
  })
})
