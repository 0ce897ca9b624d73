/**
 * The TypeScript client's changes calls against the service's changes routes (`GET /plants/changes`, its
 * live stream, `/plants/changes/head`, `GET /plants/{id}/history`): on SQLite and PostgreSQL, in process
 * and, for `follow` across a `kill -9` and a restart, as a spawned process.
 */
import { join } from 'node:path'
import { describe, expect, it, vi } from 'vitest'
import { ChangesExpiredError, Plantstore, type Change, type FollowOptions } from '../../clients/typescript/src/index.js'
import { backends, TEST_TOKEN, temporaryFolder, type Backend } from '../helpers/app.js'
import { DEFAULT_CHANGES_CONFIG } from '../../src/config.js'
import { sharedClientService } from '../helpers/client-service.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'

const TWO_53 = 2n ** 53n
const WRITER = `name=gardener;scopes=plants:read+plants:write;${TEST_TOKEN}`
const stored = backends.filter((backend) => backend.name !== 'memory')

/** Follows changes in the background, collecting them, until `stop`. */
function following (ps: Plantstore, options: FollowOptions = {}) {
  const controller = new AbortController()
  const seen: Change[] = []
  const finished = (async () => {
    for await (const change of ps.changes.follow({ ...options, signal: controller.signal })) seen.push(change)
  })()
  return {
    seen,
    /** Resolves once `count` changes have arrived. */
    received: (count: number, timeout = 15_000) => vi.waitFor(() => { expect(seen.length).toBeGreaterThanOrEqual(count) }, { timeout, interval: 20 }),
    stop: async () => {
      controller.abort()
      await finished
    }
  }
}

const summary = (change: Change): string => `${change.type} ${change.id} ${change.plant?.name ?? '-'}`

describe.each(stored)('Changes through the client, on $name', (backend) => {
  const service = sharedClientService(backend, { tokens: [WRITER] })

  it('reads the head as a bigint that grows with each write', async () => {
    const ps = service().client()
    const before = await ps.changes.head()
    expect(typeof before).toBe('bigint')
    await ps.plants.create({ id: 1, name: 'Fern' })
    expect(await ps.changes.head()).toBeGreaterThan(before)
  })

  it('yields a plant\'s history newest first across pages, each change with who made it, ids exact', async () => {
    const ps = service().client()
    const id = TWO_53 + 11n
    await ps.plants.create({ id, name: 'Moss' })
    await ps.plants.update(id, { tag: 'shade' })
    await ps.plants.delete(id)
    const history = []
    for await (const change of ps.plants.history(id, { pageSize: 1 })) history.push(change)
    expect(history.map(summary)).toEqual([`plant.deleted ${id} -`, `plant.updated ${id} Moss`, `plant.created ${id} Moss`])
    expect(history.map((change) => change.by)).toEqual(['gardener', 'gardener', 'gardener'])
    expect(history[1]?.plant).toEqual({ id, name: 'Moss', tag: 'shade' })
    expect(history[0]!.seq).toBeGreaterThan(history[1]!.seq)
    const older = []
    for await (const change of ps.plants.history(id.toString(), { after: history[0]!.seq })) older.push(change)
    expect(older.map(summary)).toEqual(history.slice(1).map(summary))
  })

  it('follows the changes committed after it starts, in order, filtered by tag and type, ids above 2^53 exact', async () => {
    const ps = service().client()
    const created = following(ps, { after: await ps.changes.head(), tag: 'followed', types: ['plant.created'] })
    const all = following(ps)
    const probe = TWO_53 + 20n
    await vi.waitFor(async () => {
      // Without `after`, a follower yields what is committed once it has read the head: a probe shows when.
      await ps.plants.replace(probe, { name: `probe ${performance.now()}` })
      expect(all.seen.length).toBeGreaterThan(0)
    }, { timeout: 10_000, interval: 200 })
    await ps.plants.create({ id: TWO_53 + 21n, name: 'Ivy', tag: 'followed' })
    await ps.plants.update(TWO_53 + 21n, { name: 'English ivy' })
    await ps.plants.create({ id: -(2n ** 63n), name: 'Lowest', tag: 'followed' })
    await ps.plants.delete(TWO_53 + 21n)
    await vi.waitFor(() => { expect(all.seen.filter((change) => change.id !== probe)).toHaveLength(4) }, { timeout: 15_000, interval: 20 })
    await created.received(2)
    await all.stop()
    await created.stop()
    expect(all.seen.filter((change) => change.id !== probe).map(summary)).toEqual([
      `plant.created ${TWO_53 + 21n} Ivy`, `plant.updated ${TWO_53 + 21n} English ivy`,
      `plant.created ${-(2n ** 63n)} Lowest`, `plant.deleted ${TWO_53 + 21n} -`
    ])
    const seqs = all.seen.map((change) => change.seq)
    expect(seqs).toEqual([...seqs].sort((a, b) => (a < b ? -1 : 1)))
    expect(new Set(seqs).size).toBe(seqs.length)
    expect(created.seen.map(summary)).toEqual([`plant.created ${TWO_53 + 21n} Ivy`, `plant.created ${-(2n ** 63n)} Lowest`])
  })
})

describe.each(stored)('Changes past their retention, on $name', (backend) => {
  /** Long enough that the follower below reads its change in time on a busy machine. */
  const RETENTION_MS = 2000
  const service = sharedClientService(backend, { tokens: [WRITER], config: { changes: { ...DEFAULT_CHANGES_CONFIG, retentionMs: RETENTION_MS } } })

  it('throws ChangesExpiredError for a resume point whose changes are gone; head, plants, then follow recovers', async () => {
    const ps = service().client()
    await ps.plants.create({ id: 1, name: 'Fern' })
    await new Promise((resolve) => setTimeout(resolve, RETENTION_MS + 200))
    const error = await ps.changes.follow({ after: 0 }).next().catch((reason: unknown) => reason)
    expect(error).toBeInstanceOf(ChangesExpiredError)
    expect(error).toMatchObject({ status: 410, error: 410, message: expect.stringMatching(/^changes after seq 0 are no longer kept/) })

    const head = await ps.changes.head()
    const plants = []
    for await (const plant of ps.plants.list()) plants.push(plant)
    expect(plants).toEqual([{ id: 1n, name: 'Fern' }])
    const follower = following(ps, { after: head })
    await ps.plants.update(1, { tag: 'again' })
    await follower.received(1)
    await follower.stop()
    expect(follower.seen.map(summary)).toEqual(['plant.updated 1 Fern'])
  })
})

/** DATABASE_URL of a fresh store of the backend for a spawned service. */
async function databaseUrl (backend: Backend): Promise<string> {
  return backend.name === 'sqlite' ? `sqlite:${join(temporaryFolder(), 'plants.db')}` : await createTestDatabase()
}

describe.each(stored)('Following across a kill -9 of the service, on $name', (backend) => {
  it('misses nothing and repeats nothing when the service is killed and started again', { timeout: 60_000 }, async () => {
    const env = { DATABASE_URL: await databaseUrl(backend), PLANTSTORE_TOKENS: WRITER }
    const first = await startServer(env)
    const ps = new Plantstore({ baseUrl: first.baseUrl, token: TEST_TOKEN, retryDelay: { initialMs: 50, maxMs: 1000 } })
    const follower = following(ps, { after: await ps.changes.head() })
    const ids = Array.from({ length: 30 }, (_, index) => TWO_53 + BigInt(index))
    for (const id of ids.slice(0, 15)) await ps.plants.create({ id, name: `before ${id}` })
    await follower.received(10)

    first.child.kill('SIGKILL')
    await first.exited
    const port = new URL(first.baseUrl).port
    const second = await startServer({ ...env, PORT: port })
    expect(second.baseUrl).toBe(first.baseUrl)
    for (const id of ids.slice(15)) await ps.plants.create({ id, name: `after ${id}` })
    await follower.received(30)
    await follower.stop()

    expect(follower.seen.map((change) => change.id)).toEqual(ids)
    expect(follower.seen.map((change) => change.plant?.name)).toEqual(ids.map((id, index) => `${index < 15 ? 'before' : 'after'} ${id}`))
    const seqs = follower.seen.map((change) => change.seq)
    expect(seqs.every((seq, index) => index === 0 || seq > seqs[index - 1]!)).toBe(true)
  })
})
