import { join } from 'node:path'
import Database from '../../src/store/sqlite/driver.js'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import { startLifecycleLoad, survivingDocuments, until, type PlantWrite } from '../helpers/load.js'

const TOKEN = 'crash-test-token'
const ROUNDS = 3

async function readPlant (baseUrl: string, id: number) {
  const response = await fetch(`${baseUrl}/plants/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })
  return { status: response.status, body: await response.text() }
}

describe.each([
  { name: 'sqlite', databaseUrl: async () => `sqlite:${join(temporaryFolder(), 'crash.db')}` },
  { name: 'postgres', databaseUrl: createTestDatabase }
])('kill -9 under concurrent write load on $name', ({ name, databaseUrl }) => {
  it(`loses no acknowledged create, replace, patch or delete and half-writes nothing, over ${ROUNDS} rounds`, { timeout: 120_000 }, async () => {
    const env = { DATABASE_URL: await databaseUrl(), PLANTSTORE_TOKENS: TOKEN }
    const everyWrite = new Map<number, PlantWrite[]>()
    const wrongAnswers: string[] = []

    for (let round = 0; round < ROUNDS; round++) {
      const server = await startServer(env)
      // The kill follows an acknowledgement at once, while the next writes are still on their way to disk.
      const killAfter = 300 + round * 100
      const load = startLifecycleLoad(server.baseUrl, TOKEN, {
        workers: 32,
        firstId: round * 100_000,
        maxPlants: 50_000,
        onAcknowledged: (count) => { if (count === killAfter) process.kill(server.child.pid as number, 'SIGKILL') }
      })
      await until(() => server.child.exitCode !== null || server.child.signalCode !== null, 20_000, 'the kill')
      await server.exited
      await load.stop()
      for (const [id, writes] of load.writes) everyWrite.set(id, writes)
      wrongAnswers.push(...load.wrongAnswers)
    }

    const survivor = await startServer(env)
    const lost = []
    for (const [id, writes] of everyWrite) {
      const read = await readPlant(survivor.baseUrl, id)
      const found = read.status === 404 ? undefined : read.status === 200 ? read.body : `${read.status} ${read.body}`
      if (!survivingDocuments(writes).includes(found)) lost.push({ id, found, writes })
    }
    const allWrites = [...everyWrite.values()].flat()
    const unansweredMethods = new Set(allWrites.filter((write) => !write.acknowledged).map((write) => write.method))
    const acknowledgedMethods = new Set(allWrites.filter((write) => write.acknowledged).map((write) => write.method))

    expect(wrongAnswers).toEqual([])
    // Writes of every kind were acknowledged before the kills, and left unanswered by them.
    expect(acknowledgedMethods).toEqual(new Set(['POST', 'PUT', 'PATCH', 'DELETE']))
    expect(unansweredMethods).toEqual(new Set(['POST', 'PUT', 'PATCH', 'DELETE']))
    // Each plant holds what its last acknowledged write made of it, or what an unanswered later write
    // made of it whole; a plant whose last write was acknowledged holds exactly that write's result, so
    // one whose acknowledged DELETE was its last write is absent (404).
    expect(lost).toEqual([])
    if (name === 'sqlite') {
      const db = new Database(env.DATABASE_URL.slice('sqlite:'.length), { readonly: true })
      try {
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
      } finally {
        db.close()
      }
    }
  })
})
