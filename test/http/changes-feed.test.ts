/**
 * `GET /plants/changes` and `GET /plants/changes/head` on every backend, through app.inject: the change
 * each kind of write records and the writes that record none, exact int64 ids and seq, `at`, the `Link`
 * on every page (empty ones included), paging to the end, the `tag` and `type` filters, the head, and the
 * 410 of a resume point past the retention. The live stream (`Accept: text/event-stream`) has its own
 * tests; the 400s of bad input are in changes-validation.test.ts.
 *
 * Most tests share one app per backend: each reads the head first and then only the changes after it.
 * The contract lets `seq` skip numbers, but every backend numbers without gaps (a rolled-back write takes
 * none), so the exact numbers expected here also prove that a write recorded nothing more.
 */
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { describe, expect, it, onTestFinished } from 'vitest'
import Database from '../../src/store/sqlite/driver.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { backends, bearer, buildTestApp, expectError, postPlant, sharedTestApp, temporaryFolder, TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import {
  created, deleted, expectPage, expectStatuses, headOf, nextLink, page, patch, put, read, remove, untilPast, updated, withoutPruning
} from '../helpers/changes.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

const MAX = '9223372036854775807'
const MIN = '-9223372036854775808'
const EXPIRED = (after: bigint | number | string) => `changes after seq ${after} are no longer kept (CHANGES_RETENTION): read the plants again ` +
  '(GET /plants/changes/head, then the plants, then the changes after that head)'

const batch = (app: FastifyInstance, operations: unknown) => app.inject({
  method: 'POST', url: '/plants/batch', headers: { ...bearer(), 'content-type': 'application/json' }, payload: JSON.stringify({ operations })
})

/**
 * Runs `act` between a read of the head and a read of the feed after it: the head before, the page of
 * what `act` recorded, and the clock around `act` (each change's `at` must fall within it).
 */
async function recordedBy (app: FastifyInstance, act: () => Promise<void>) {
  const head = await headOf(app)
  const from = Date.now()
  await act()
  const to = Date.now()
  return { head, from, to, response: await read(app, `/plants/changes?after=${head}`) }
}

describe.each(backends)('The change feed on $name', (backend) => {
  const shared = sharedTestApp(backend)

  describe('records what each write did, and nothing for a write that changed nothing', () => {
    it('records plant.created with the plant for a POST of a new id; nothing for its replay, nor for a conflicting POST', async () => {
      const app = shared()

      const { head, from, to, response } = await recordedBy(app, () => expectStatuses(
        [() => postPlant(app, { id: 101, name: 'Fern', tag: 'shade' }), 200],
        [() => postPlant(app, { id: 101, name: 'Fern', tag: 'shade' }), 200],
        [() => postPlant(app, { id: 101, name: 'Other fern' }), 409]
      ))

      expectPage(response, { body: page(created(head + 1n, '{"id":101,"name":"Fern","tag":"shade"}')), link: nextLink(`after=${head + 1n}&limit=100`), from, to })
      expect(await headOf(app)).toBe(head + 1n)
    })

    it('records plant.created for a PUT that creates, plant.updated for one that replaces, and nothing for one that changes nothing', async () => {
      const app = shared()

      const { head, from, to, response } = await recordedBy(app, () => expectStatuses(
        [() => put(app, '102', { name: 'Moss', tag: 'shade' }), 201],
        [() => put(app, '102', { name: 'Moss', tag: 'shade' }), 200],
        [() => put(app, '102', { name: 'Moss' }), 200],
        [() => put(app, '102', { id: 102, name: 'Moss' }), 200]
      ))

      expectPage(response, {
        body: page(created(head + 1n, '{"id":102,"name":"Moss","tag":"shade"}'), updated(head + 2n, '{"id":102,"name":"Moss"}')),
        link: nextLink(`after=${head + 2n}&limit=100`),
        from,
        to
      })
    })

    it('records plant.updated for a PATCH that changes the plant; nothing for one that changes nothing, nor for a PATCH of a missing plant', async () => {
      const app = shared()
      await expectStatuses([() => postPlant(app, { id: 103, name: 'Ivy' }), 200])

      const { head, from, to, response } = await recordedBy(app, () => expectStatuses(
        [() => patch(app, '103', { tag: 'wall' }), 200],
        [() => patch(app, '103', { tag: 'wall' }), 200],
        [() => patch(app, '103', { name: 'Ivy', tag: null }), 200],
        [() => patch(app, '103', {}), 200],
        [() => patch(app, '199', { name: 'nobody' }), 404]
      ))

      expectPage(response, {
        body: page(updated(head + 1n, '{"id":103,"name":"Ivy","tag":"wall"}'), updated(head + 2n, '{"id":103,"name":"Ivy"}')),
        link: nextLink(`after=${head + 2n}&limit=100`),
        from,
        to
      })
    })

    it('records plant.deleted without a plant for a DELETE, nothing for a DELETE of a missing plant, and plant.created when a PUT brings it back', async () => {
      const app = shared()
      await expectStatuses([() => postPlant(app, { id: 104, name: 'Rose', tag: 'red' }), 200])

      const { head, from, to, response } = await recordedBy(app, () => expectStatuses(
        [() => remove(app, '104'), 204],
        [() => remove(app, '104'), 404],
        [() => put(app, '104', { name: 'Rose', tag: 'red' }), 201]
      ))

      expectPage(response, {
        body: page(deleted(head + 1n, '104'), created(head + 2n, '{"id":104,"name":"Rose","tag":"red"}')),
        link: nextLink(`after=${head + 2n}&limit=100`),
        from,
        to
      })
    })

    it('records nothing for a write whose precondition fails: If-Match on PUT, PATCH and DELETE, If-None-Match: * on PUT', async () => {
      const app = shared()
      await expectStatuses([() => put(app, '105', { name: 'Sage' }), 201])

      const { head, from, to, response } = await recordedBy(app, () => expectStatuses(
        [() => put(app, '105', { name: 'Sage', tag: 'herb' }, { 'if-match': '"stale"' }), 412],
        [() => patch(app, '105', { tag: 'herb' }, { 'if-match': '"stale"' }), 412],
        [() => remove(app, '105', { 'if-match': '"stale"' }), 412],
        [() => put(app, '105', { name: 'Sage', tag: 'herb' }, { 'if-none-match': '*' }), 412],
        [() => remove(app, '198', { 'if-match': '*' }), 412],
        [() => put(app, '198', { name: 'nobody' }, { 'if-match': '*' }), 412]
      ))

      expectPage(response, { body: '[]', link: nextLink(`after=${head}&limit=100`), from, to })
      expect(await headOf(app)).toBe(head)
    })

    it('records a batch\'s changes in operation order, not id order, leaving out a replay and a PUT that changes nothing', async () => {
      const app = shared()

      const { head, from, to, response } = await recordedBy(app, () => expectStatuses([() => batch(app, [
        { method: 'POST', body: { id: 630, name: 'Oak', tag: 'tree' } },
        { method: 'PUT', id: 610, body: { name: 'Birch' } },
        { method: 'POST', body: { id: 630, name: 'Oak', tag: 'tree' } },
        { method: 'PATCH', id: 630, body: { tag: null } },
        { method: 'PUT', id: 610, body: { name: 'Birch' } },
        { method: 'DELETE', id: 610 },
        { method: 'PUT', id: 620, body: { name: 'Elm', tag: 'tree' } }
      ]), 200]))

      expectPage(response, {
        body: page(
          created(head + 1n, '{"id":630,"name":"Oak","tag":"tree"}'),
          created(head + 2n, '{"id":610,"name":"Birch"}'),
          updated(head + 3n, '{"id":630,"name":"Oak"}'),
          deleted(head + 4n, '610'),
          created(head + 5n, '{"id":620,"name":"Elm","tag":"tree"}')
        ),
        link: nextLink(`after=${head + 5n}&limit=100`),
        from,
        to
      })
    })

    it('records nothing of a refused batch, not even the operations before the one that failed', async () => {
      const app = shared()
      await expectStatuses([() => postPlant(app, { id: 640, name: 'Yew' }), 200])

      const { head, from, to, response } = await recordedBy(app, async () => {
        expectError(await batch(app, [{ method: 'PUT', id: 641, body: { name: 'Applied first' } }, { method: 'POST', body: { id: 640, name: 'Not yew' } }]), 409,
          'operations[1]: plant 640 already exists with a different name or tag')
      })

      expectPage(response, { body: '[]', link: nextLink(`after=${head}&limit=100`), from, to })
      expect(await headOf(app)).toBe(head)
    })

    it('writes int64 ids with every digit: the greatest, the least, and one above 2^53', async () => {
      const app = shared()

      const { head, from, to, response } = await recordedBy(app, () => expectStatuses(
        [() => postPlant(app, `{"id":${MAX},"name":"Max","tag":"edge"}`), 200],
        [() => postPlant(app, `{"id":${MIN},"name":"Min"}`), 200],
        [() => postPlant(app, '{"id":9007199254740993,"name":"Above double"}'), 200],
        [() => patch(app, MAX, { name: 'Max again' }), 200],
        [() => remove(app, MIN), 204]
      ))

      expectPage(response, {
        body: page(
          created(head + 1n, `{"id":${MAX},"name":"Max","tag":"edge"}`),
          created(head + 2n, `{"id":${MIN},"name":"Min"}`),
          created(head + 3n, '{"id":9007199254740993,"name":"Above double"}'),
          updated(head + 4n, `{"id":${MAX},"name":"Max again","tag":"edge"}`),
          deleted(head + 5n, MIN)
        ),
        link: nextLink(`after=${head + 5n}&limit=100`),
        from,
        to
      })
    })
  })

  describe('pages, to be polled through their Link', () => {
    it('pages to the end by following next links, keeping the limit; the last link stays on the last change until more come', async () => {
      const app = shared()
      const { head, from, to } = await recordedBy(app, async () => {
        for (const id of [201, 202, 203, 204, 205]) await expectStatuses([() => postPlant(app, { id, name: `p${id}` }), 200])
      })
      const at = (n: number) => head + BigInt(n)
      const plant = (n: number) => `{"id":${200 + n},"name":"p${200 + n}"}`

      const first = await read(app, `/plants/changes?after=${head}&limit=2`)
      expectPage(first, { body: page(created(at(1), plant(1)), created(at(2), plant(2))), link: nextLink(`after=${at(2)}&limit=2`), from, to })
      const second = await read(app, `/plants/changes?after=${at(2)}&limit=2`)
      expectPage(second, { body: page(created(at(3), plant(3)), created(at(4), plant(4))), link: nextLink(`after=${at(4)}&limit=2`), from, to })
      const third = await read(app, `/plants/changes?after=${at(4)}&limit=2`)
      expectPage(third, { body: page(created(at(5), plant(5))), link: nextLink(`after=${at(5)}&limit=2`), from, to })
      const end = await read(app, `/plants/changes?after=${at(5)}&limit=2`)
      expectPage(end, { body: '[]', link: nextLink(`after=${at(5)}&limit=2`), from, to })

      // A change written later is on the page the last link names.
      const later = Date.now()
      await expectStatuses([() => postPlant(app, { id: 206, name: 'p206' }), 200])
      expectPage(await read(app, `/plants/changes?after=${at(5)}&limit=2`), {
        body: page(created(at(6), plant(6))), link: nextLink(`after=${at(6)}&limit=2`), from: later, to: Date.now()
      })
    })

    it('answers a resume point beyond the head, up to the int64 maximum, with an empty page whose link keeps it', async () => {
      const app = shared()
      const head = await headOf(app)

      for (const after of [head + 1000n, BigInt(MAX)]) {
        expectPage(await read(app, `/plants/changes?after=${after}&limit=7`), { body: '[]', link: nextLink(`after=${after}&limit=7`), from: 0, to: 0 })
      }
    })
  })

  describe('filters by type and by tag, the link keeping the filters', () => {
    it('selects a subset of the three types, in any order, each page\'s link keeping it as given', async () => {
      const app = shared()
      const { head, from, to } = await recordedBy(app, () => expectStatuses(
        [() => postPlant(app, { id: 301, name: 'Aloe' }), 200],
        [() => patch(app, '301', { name: 'Aloe vera' }), 200],
        [() => remove(app, '301'), 204],
        [() => postPlant(app, { id: 302, name: 'Basil' }), 200]
      ))
      const aloe = created(head + 1n, '{"id":301,"name":"Aloe"}')
      const renamed = updated(head + 2n, '{"id":301,"name":"Aloe vera"}')
      const gone = deleted(head + 3n, '301')
      const basil = created(head + 4n, '{"id":302,"name":"Basil"}')

      const cases: Array<[string, string[], bigint]> = [
        ['plant.created', [aloe, basil], head + 4n],
        ['plant.updated', [renamed], head + 2n],
        ['plant.deleted,plant.updated', [renamed, gone], head + 3n],
        ['plant.updated,plant.deleted,plant.created', [aloe, renamed, gone, basil], head + 4n]
      ]
      for (const [type, changes, last] of cases) {
        expectPage(await read(app, `/plants/changes?after=${head}&type=${type}`), { body: page(...changes), link: nextLink(`after=${last}&limit=100&type=${type}`), from, to })
      }
      // Paged one at a time, the filter goes on with the link.
      expectPage(await read(app, `/plants/changes?type=plant.created&limit=1&after=${head}`), {
        body: page(aloe), link: nextLink(`after=${head + 1n}&limit=1&type=plant.created`), from, to
      })
      expectPage(await read(app, `/plants/changes?after=${head + 1n}&limit=1&type=plant.created`), {
        body: page(basil), link: nextLink(`after=${head + 4n}&limit=1&type=plant.created`), from, to
      })
      expectPage(await read(app, `/plants/changes?after=${head + 4n}&limit=1&type=plant.created`), {
        body: '[]', link: nextLink(`after=${head + 4n}&limit=1&type=plant.created`), from, to
      })
    })

    it('selects the changes of plants that had the tag before or after, so a plant leaving it (retagged, untagged, deleted) is seen', async () => {
      const app = shared()
      const tag = `shade & sun/ü ${backend.name}`
      const encoded = encodeURIComponent(tag)
      const { head, from, to } = await recordedBy(app, () => expectStatuses(
        [() => postPlant(app, { id: 401, name: 'Fern', tag }), 200],
        [() => postPlant(app, { id: 402, name: 'Moss', tag: 'sun' }), 200],
        [() => patch(app, '401', { tag: 'sun' }), 200],
        [() => postPlant(app, { id: 403, name: 'Ivy', tag }), 200],
        [() => remove(app, '403'), 204],
        [() => postPlant(app, { id: 404, name: 'Sedge', tag }), 200],
        [() => patch(app, '404', { name: 'Sedge grass' }), 200],
        [() => patch(app, '402', { tag }), 200],
        [() => put(app, '401', { name: 'Fern' }), 200],
        [() => patch(app, '402', { tag: null }), 200]
      ))
      const json = (id: number, name: string, plantTag?: string) => JSON.stringify({ id, name, ...(plantTag === undefined ? {} : { tag: plantTag }) })
      const seq = (n: number) => head + BigInt(n)

      expectPage(await read(app, `/plants/changes?after=${head}&tag=${encoded}`), {
        body: page(
          created(seq(1), json(401, 'Fern', tag)),
          updated(seq(3), json(401, 'Fern', 'sun')),
          created(seq(4), json(403, 'Ivy', tag)),
          deleted(seq(5), '403'),
          created(seq(6), json(404, 'Sedge', tag)),
          updated(seq(7), json(404, 'Sedge grass', tag)),
          updated(seq(8), json(402, 'Moss', tag)),
          updated(seq(10), json(402, 'Moss'))
        ),
        link: nextLink(`after=${seq(10)}&limit=100&tag=${encoded}`),
        from,
        to
      })
      expectPage(await read(app, `/plants/changes?after=${head}&tag=sun`), {
        body: page(
          created(seq(2), json(402, 'Moss', 'sun')),
          updated(seq(3), json(401, 'Fern', 'sun')),
          updated(seq(8), json(402, 'Moss', tag)),
          updated(seq(9), json(401, 'Fern'))
        ),
        link: nextLink(`after=${seq(9)}&limit=100&tag=sun`),
        from,
        to
      })
      expectPage(await read(app, `/plants/changes?after=${head}&tag=${encoded}&type=plant.deleted&limit=5`), {
        body: page(deleted(seq(5), '403')), link: nextLink(`after=${seq(5)}&limit=5&tag=${encoded}&type=plant.deleted`), from, to
      })
      expectPage(await read(app, `/plants/changes?after=${seq(10)}&tag=${encoded}`), { body: '[]', link: nextLink(`after=${seq(10)}&limit=100&tag=${encoded}`), from, to })
    })

    it('selects the empty tag with tag=, never a plant without a tag', async () => {
      const app = shared()
      const { head, from, to } = await recordedBy(app, () => expectStatuses(
        [() => postPlant(app, { id: 501, name: 'Bare' }), 200],
        [() => postPlant(app, { id: 502, name: 'Empty', tag: '' }), 200]
      ))

      expectPage(await read(app, `/plants/changes?after=${head}&tag=`), {
        body: page(created(head + 2n, '{"id":502,"name":"Empty","tag":""}')), link: nextLink(`after=${head + 2n}&limit=100&tag=`), from, to
      })
    })
  })
})

describe.each(backends)('The head and the resume points of the change feed on $name', (backend) => {
  it('answers head 0 and an empty first page with its link on a fresh store, then the greatest seq, the first page starting at the oldest', async () => {
    const app = await buildTestApp({ store: await backend.open() })

    const head = await read(app, '/plants/changes/head')
    expect({ status: head.statusCode, type: head.headers['content-type'], body: head.body }).toEqual({ status: 200, type: 'application/json; charset=utf-8', body: '{"seq":0}' })
    expectPage(await read(app, '/plants/changes'), { body: '[]', link: nextLink('after=0&limit=100'), from: 0, to: 0 })
    const from = Date.now()
    await expectStatuses([() => postPlant(app, { id: 1, name: 'Fern' }), 200], [() => remove(app, '1'), 204])
    const to = Date.now()

    expect((await read(app, '/plants/changes/head')).body).toBe('{"seq":2}')
    expectPage(await read(app, '/plants/changes'), { body: page(created(1n, '{"id":1,"name":"Fern"}'), deleted(2n, '1')), link: nextLink('after=2&limit=100'), from, to })
  })

  it('answers 410 for a resume point whose next changes were pruned, a page from the newest pruned seq on, and keeps the head when all are pruned', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store })
    const from = Date.now()
    for (const id of [1, 2, 3, 4, 5]) await expectStatuses([() => postPlant(app, { id, name: `p${id}` }), 200])
    const to = Date.now()

    // The three oldest changes, whatever the retention: as a round of pruning leaves the log.
    expect(await store.changes.prune(Date.now() + 60_000, 3)).toBe(3)

    for (const [url, after] of [['/plants/changes', 0], ['/plants/changes?after=0', 0], ['/plants/changes?after=2', 2], ['/plants/changes?after=1&tag=x&type=plant.deleted&limit=1', 1]] as const) {
      expectError(await read(app, url), 410, EXPIRED(after))
    }
    expectPage(await read(app, '/plants/changes?after=3'), {
      body: page(created(4n, '{"id":4,"name":"p4"}'), created(5n, '{"id":5,"name":"p5"}')), link: nextLink('after=5&limit=100'), from, to
    })
    expectPage(await read(app, '/plants/changes?after=5'), { body: '[]', link: nextLink('after=5&limit=100'), from, to })

    expect(await store.changes.prune(Date.now() + 60_000, 1000)).toBe(2)
    expect(await headOf(app)).toBe(5n)
    expectError(await read(app, '/plants/changes?after=4'), 410, EXPIRED(4))
    expectPage(await read(app, '/plants/changes?after=5'), { body: '[]', link: nextLink('after=5&limit=100'), from, to })
    const later = Date.now()
    await expectStatuses([() => postPlant(app, { id: 6, name: 'p6' }), 200])
    expect(await headOf(app)).toBe(6n)
    expectPage(await read(app, '/plants/changes?after=5'), { body: page(created(6n, '{"id":6,"name":"p6"}')), link: nextLink('after=6&limit=100'), from: later, to: Date.now() })
  })

  it('answers 410 for a change past CHANGES_RETENTION that is not pruned yet, and an empty page after it', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store: withoutPruning(store), config: { changes: { retentionMs: 50, streamsMax: 1000 } } })
    await expectStatuses([() => postPlant(app, { id: 1, name: 'Fern' }), 200])
    const written = Date.now()

    await untilPast(written, 50)

    expectError(await read(app, '/plants/changes'), 410, EXPIRED(0))
    expectError(await read(app, '/plants/changes?after=0&type=plant.updated'), 410, EXPIRED(0))
    expectPage(await read(app, '/plants/changes?after=1'), { body: '[]', link: nextLink('after=1&limit=100'), from: 0, to: 0 })
    expect(await store.changes.extent()).toEqual({ head: 1n, kept: 1, oldestSeq: 1n })
  })
})

/**
 * A store whose log has reached `seq` 2^53 + 1, every change before pruned, as after years of writes: set
 * in its tables, since no test can write that many changes.
 */
const PAST_DOUBLES = 9007199254740993n
const storesPastDoubles: Array<[string, () => Promise<PlantStore>]> = [
  ['sqlite', async () => {
    const file = join(temporaryFolder(), 'plants.db')
    const store = openSqliteStore(file)
    const db = new Database(file)
    db.prepare('UPDATE change_log SET head = ?, pruned_through = ? WHERE singleton = 1').run(PAST_DOUBLES, PAST_DOUBLES)
    db.close()
    return store
  }],
  ['postgres', async () => {
    const url = await createTestDatabase()
    const store = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    onTestFinished(() => client.end())
    await client.query('UPDATE change_log_head SET head = $1', [String(PAST_DOUBLES)])
    await client.query('UPDATE change_log_pruned SET through = $1', [String(PAST_DOUBLES)])
    return store
  }]
]

describe.each(storesPastDoubles)('Seq numbers past 2^53 on %s', (_backend, open) => {
  it('writes and reads every seq with every digit: the feed, its Link, the head, a history, the 410\'s message', async () => {
    const app = await buildTestApp({ store: await open() })
    const from = Date.now()
    await expectStatuses([() => postPlant(app, { id: 1, name: 'Fern' }), 200], [() => patch(app, '1', { tag: 'old' }), 200])
    const to = Date.now()

    expectPage(await read(app, `/plants/changes?after=${PAST_DOUBLES}`), {
      body: page(created(9007199254740994n, '{"id":1,"name":"Fern"}'), updated(9007199254740995n, '{"id":1,"name":"Fern","tag":"old"}')),
      link: nextLink('after=9007199254740995&limit=100'),
      from,
      to
    })
    expect((await read(app, '/plants/changes/head')).body).toBe('{"seq":9007199254740995}')
    expect((await read(app, '/plants/1/history?limit=1')).headers.link).toBe('</plants/1/history?after=9007199254740995&limit=1>; rel="next"')
    expectError(await read(app, '/plants/changes?after=9007199254740992'), 410, EXPIRED('9007199254740992'))
  })
})
