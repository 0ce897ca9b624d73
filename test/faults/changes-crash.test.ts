/**
 * Issue 37, "Bad input and faults": `kill -9` under load on both engines. The service process is killed
 * twice while single writes of every kind and batches stream in through HTTP, then started again; the
 * change log, read from its start through the store API, must run 1..head without a gap and fold to
 * exactly the plants the store holds, hold the change of every acknowledged write (in its order, a
 * batch's all or none), and no change without its write; a follower that resumes from its last `seq`
 * after each kill must have missed nothing.
 */
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { temporaryFolder, TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import { changesById, FeedReader, foldChanges, oneTo, storedPlants, storeFeed, wholeLog } from '../helpers/change-feed.js'
import { startLifecycleLoad, until, type PlantWrite } from '../helpers/load.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'
import type { ChangeRecord } from '../../src/store/change-log.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'

const TOKEN = 'changes-crash-token'
const KILLS = 2
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A batch the test sent on three fresh ids, and whether its expected 200 came back. */
interface SentBatch {
  readonly first: number
  acknowledged: boolean
}

/** A batch of every kind of operation on the fresh ids first, first + 1, first + 2: seven changes. */
function operationsOf (first: number): unknown[] {
  return [
    { method: 'POST', body: { id: first, name: `batch ${first}`, tag: 'b' } },
    { method: 'POST', body: { id: first + 1, name: `batch ${first + 1}` } },
    { method: 'PUT', id: first + 2, body: { name: `batch ${first + 2}`, tag: 'b' } },
    { method: 'PATCH', id: first, body: { tag: null } },
    { method: 'DELETE', id: first + 1 },
    { method: 'PUT', id: first + 1, body: { name: `again ${first + 1}` } },
    { method: 'PATCH', id: first + 2, body: { name: `renamed ${first + 2}` } }
  ]
}
const BATCH_STATUSES = [200, 200, 201, 200, 204, 201, 200]

/** The changes (changeText) each id of a batch records, in order. */
function batchChanges (first: number): Array<[string, string[]]> {
  return [
    [String(first), [`plant.created {"id":${first},"name":"batch ${first}","tag":"b"}`, `plant.updated {"id":${first},"name":"batch ${first}"}`]],
    [String(first + 1), [
      `plant.created {"id":${first + 1},"name":"batch ${first + 1}"}`, 'plant.deleted -', `plant.created {"id":${first + 1},"name":"again ${first + 1}"}`
    ]],
    [String(first + 2), [
      `plant.created {"id":${first + 2},"name":"batch ${first + 2}","tag":"b"}`, `plant.updated {"id":${first + 2},"name":"renamed ${first + 2}","tag":"b"}`
    ]]
  ]
}

/** The change a lifecycle write records (changeText): its type by method, and the plant it leaves. */
function lifecycleChange (write: PlantWrite): string {
  const type = write.method === 'POST' ? 'plant.created' : write.method === 'DELETE' ? 'plant.deleted' : 'plant.updated'
  return `${type} ${write.document ?? '-'}`
}

/** Sends batches one after another until stopped; a batch is acknowledged by a 200 with the expected statuses. */
async function batchWorker (
  baseUrl: string, nextFirst: () => number, sent: SentBatch[], wrongAnswers: string[], state: { stopped: boolean }, onAcknowledged: () => void
): Promise<void> {
  while (!state.stopped) {
    const batch: SentBatch = { first: nextFirst(), acknowledged: false }
    sent.push(batch)
    try {
      const response = await fetch(`${baseUrl}/plants/batch`, {
        method: 'POST', headers, body: JSON.stringify({ operations: operationsOf(batch.first) }), signal: AbortSignal.timeout(10_000)
      })
      const text = await response.text()
      const statuses = response.status === 200 ? (JSON.parse(text) as { results: Array<{ status: number }> }).results.map((result) => result.status) : []
      if (response.status === 200 && statuses.join() === BATCH_STATUSES.join()) {
        batch.acknowledged = true
        onAcknowledged()
      } else if (response.status !== 503) {
        wrongAnswers.push(`batch ${batch.first}: ${response.status} ${text}`)
      }
    } catch {
      await pause(20)
    }
  }
}

/**
 * What the log must hold for each id written, given what was acknowledged: findings, none expected. A
 * plant's lifecycle writes were sent one at a time, each after the one before was acknowledged, so its
 * changes are those of its acknowledged writes, in order, then maybe of the unanswered one after them. A
 * batch's changes are all there when it was acknowledged, all or none when it was not. Every id of the
 * log must be one the test wrote.
 */
function findingsOf (log: readonly ChangeRecord[], lifecycles: ReadonlyMap<number, readonly PlantWrite[]>, batches: readonly SentBatch[]): string[] {
  const byId = changesById(log)
  const findings: string[] = []
  const written = new Set<string>()
  for (const [id, writes] of lifecycles) {
    written.add(String(id))
    const found = byId.get(String(id)) ?? []
    const lastAcknowledged = writes.findLastIndex((write) => write.acknowledged)
    const allowed = Array.from({ length: writes.length - lastAcknowledged }, (_, extra) => writes.slice(0, lastAcknowledged + 1 + extra).map(lifecycleChange))
    if (!allowed.some((changes) => changes.join('\n') === found.join('\n'))) {
      findings.push(`plant ${id}: changes ${JSON.stringify(found)}, writes ${JSON.stringify(writes)}`)
    }
  }
  for (const batch of batches) {
    const expected = batchChanges(batch.first)
    const present = expected.map(([id, changes]) => {
      written.add(id)
      return (byId.get(id) ?? []).join('\n') === changes.join('\n')
    })
    const absent = expected.map(([id]) => !byId.has(id))
    const whole = present.every(Boolean)
    if (batch.acknowledged ? !whole : !whole && !absent.every(Boolean)) {
      findings.push(`batch ${batch.first} (${batch.acknowledged ? 'acknowledged' : 'unanswered'}): ${JSON.stringify(expected.map(([id]) => byId.get(id)))}`)
    }
  }
  for (const id of byId.keys()) if (!written.has(id)) findings.push(`plant ${id}: changes ${JSON.stringify(byId.get(id))}, but the test never wrote it`)
  return findings
}

describe.each([
  {
    name: 'sqlite',
    database: async () => {
      const file = join(temporaryFolder(), 'changes.db')
      return { url: `sqlite:${file}`, open: async () => openSqliteStore(file) }
    }
  },
  {
    name: 'postgres',
    database: async () => {
      const url = await createTestDatabase()
      return { url, open: () => openPostgresStore(url, TEST_POSTGRES_OPTIONS) }
    }
  }
])('kill -9 under a load of every kind of write, twice, on $name', ({ database }) => {
  it('leaves a change log that runs 1..head, folds to the store, holds every acknowledged write, and a resuming follower misses nothing', { timeout: 180_000 }, async () => {
    // Arrange
    const { url, open } = await database()
    const env = { DATABASE_URL: url, PLANTSTORE_TOKENS: TOKEN }
    // Each store the test opens is closed once: by the test, or when it ends.
    const opened = async () => {
      const store = await open()
      let closing: Promise<void> | undefined
      const close = () => (closing ??= store.close())
      onTestFinished(close)
      return { store, close }
    }
    const lifecycles = new Map<number, PlantWrite[]>()
    const batches: SentBatch[] = []
    const wrongAnswers: string[] = []
    const follower = new FeedReader<ChangeRecord>(async () => [], 25, 'follower')
    const seenAtKills: number[] = []
    let nextBatch = 10_000_000

    // Act: load, kill -9 in the middle of it, start again; twice
    for (let round = 0; round < KILLS; round++) {
      const server = await startServer(env)
      const followed = await opened()
      follower.source = storeFeed(followed.store)
      const seenAtStart = follower.seen.length
      const state = { stopped: false, killed: false, batchesAcknowledged: 0 }
      const killAfter = 150 + round * 100
      let writesAcknowledged = 0
      const killWhenDue = () => {
        if (state.killed || writesAcknowledged < killAfter || state.batchesAcknowledged < 2 || follower.seen.length === seenAtStart) return
        state.killed = true
        process.kill(server.child.pid as number, 'SIGKILL')
      }
      const following = (async () => {
        while (!state.killed) {
          await follower.poll()
          await pause(5)
        }
      })()
      const load = startLifecycleLoad(server.baseUrl, TOKEN, {
        workers: 16,
        firstId: round * 100_000,
        maxPlants: 50_000,
        onAcknowledged: (count) => { writesAcknowledged = count; killWhenDue() }
      })
      const batchWorkers = [0, 1, 2].map(() => batchWorker(server.baseUrl, () => (nextBatch += 10), batches, wrongAnswers, state, () => {
        state.batchesAcknowledged++
        killWhenDue()
      }))
      try {
        await until(() => state.killed, 60_000, 'the kill (enough writes and batches acknowledged, and followed)')
        await server.exited
      } finally {
        state.stopped = state.killed = true
        await Promise.all([load.stop(), ...batchWorkers, following])
      }
      for (const [id, writes] of load.writes) lifecycles.set(id, writes)
      wrongAnswers.push(...load.wrongAnswers)
      seenAtKills.push(follower.seen.length)
      await followed.close()
    }
    const survivor = await startServer(env)
    const { store } = await opened()
    follower.source = storeFeed(store)
    await follower.drain()
    const log = await wholeLog(store)
    const head = await store.changes.head()
    const folded = foldChanges(log.changes)
    const stored = await storedPlants(store)
    const followedToHead = [...follower.seen]
    const after = await fetch(`${survivor.baseUrl}/plants`, { method: 'POST', headers, body: '{"id":-1,"name":"after the kills"}' })
    await follower.drain()

    // Assert
    expect(wrongAnswers).toEqual([])
    const allWrites = [...lifecycles.values()].flat()
    expect(new Set(allWrites.filter((write) => write.acknowledged).map((write) => write.method))).toEqual(new Set(['POST', 'PUT', 'PATCH', 'DELETE']))
    expect(allWrites.some((write) => !write.acknowledged)).toBe(true)
    expect(batches.filter((batch) => batch.acknowledged).length).toBeGreaterThanOrEqual(2 * KILLS)
    // The log runs 1..head without a gap, and folds to exactly the plants stored.
    expect(log.breaks).toEqual([])
    expect(log.changes.map((change) => change.seq)).toEqual(oneTo(Number(head)))
    expect(folded.mismatches).toEqual([])
    expect(folded.plants).toEqual(stored)
    // No acknowledged write without its change, no change without its write, a batch's all or none.
    expect(findingsOf(log.changes, lifecycles, batches)).toEqual([])
    // The follower read before each kill and resumed from its last seq: it saw the whole log, once, in order.
    expect(seenAtKills[0]).toBeGreaterThan(0)
    expect(seenAtKills[1]).toBeGreaterThan(seenAtKills[0] as number)
    expect(follower.breaks).toEqual([])
    expect(followedToHead).toEqual(log.changes)
    // The restarted service numbers its next change right after the head.
    expect(after.status).toBe(200)
    expect(follower.seen.slice(followedToHead.length).map((change) => ({ seq: change.seq, type: change.type, id: change.id })))
      .toEqual([{ seq: head + 1n, type: 'plant.created', id: -1n }])
  })
})
