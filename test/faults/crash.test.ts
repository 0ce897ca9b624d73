import { join } from 'node:path'
import Database from '../../src/store/sqlite-driver.js'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helper.js'
import { createTestDatabase } from '../postgres-database.js'
import { startServer } from '../server-process.js'
import { startWriteLoad, until } from './load.js'

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
  it(`loses no acknowledged plant and half-writes nothing, over ${ROUNDS} rounds`, { timeout: 120_000 }, async () => {
    const env = { DATABASE_URL: await databaseUrl(), PLANTSTORE_TOKENS: TOKEN }
    const everyAcknowledged = new Map<number, string>()
    const everyUnanswered = new Map<number, string>()

    for (let round = 0; round < ROUNDS; round++) {
      const server = await startServer(env)
      // The kill follows an acknowledgement at once, while the next writes are still on their way to disk.
      const killAfter = 300 + round * 100
      const load = startWriteLoad(server.baseUrl, TOKEN, {
        workers: 32,
        firstId: round * 100_000,
        maxRequests: 50_000,
        onAcknowledged: (count) => { if (count === killAfter) process.kill(server.child.pid as number, 'SIGKILL') }
      })
      await until(() => server.child.exitCode !== null || server.child.signalCode !== null, 20_000, 'the kill')
      await server.exited
      await load.stop()
      for (const [id, plantName] of load.acknowledged) everyAcknowledged.set(id, plantName)
      for (const [id, plantName] of load.unanswered) everyUnanswered.set(id, plantName)
    }

    const survivor = await startServer(env)
    const readAll = async (plants: Map<number, string>) => {
      const reads = []
      for (const [id, plantName] of plants) {
        reads.push({ id, read: await readPlant(survivor.baseUrl, id), expected: JSON.stringify({ id, name: plantName }) })
      }
      return reads
    }
    const acknowledgedReads = await readAll(everyAcknowledged)
    const unansweredReads = await readAll(everyUnanswered)

    expect(everyUnanswered.size).toBeGreaterThan(0)
    expect(acknowledgedReads.filter(({ read, expected }) => read.status !== 200 || read.body !== expected)).toEqual([])
    // A write that got no answer either never happened or happened whole.
    expect(unansweredReads.filter(({ read, expected }) => !(read.status === 404 || (read.status === 200 && read.body === expected)))).toEqual([])
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
