/**
 * `GET /plants/{id}/history` on every backend, through app.inject: a plant's kept changes newest first,
 * each with who made it (a stored token's name, an environment token's, `jwt:<sub>`, `cli` for an
 * import), its `Link` to the older ones, a deleted plant's history, `[]` once its changes are pruned
 * or past the retention, and 404 for an id with neither a plant nor a kept change.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { backends, bearer, buildTestApp, expectError, postPlant, sharedTestApp, temporaryFolder, TEST_TOKEN } from '../helpers/app.js'
import {
  by, created, deleted, expectPage, expectStatuses, headOf, page, patch, put, read, remove, untilPast, updated, withoutPruning
} from '../helpers/changes.js'
import { runCli } from '../helpers/cli-process.js'
import { generateSigningKey, startIdentityProvider, type IdentityProvider } from '../helpers/identity-provider.js'
import { jwtSettingsFor } from '../helpers/jwt-service.js'
import { claimsFor } from '../helpers/jwt-tokens.js'

const MAX = '9223372036854775807'
const MIN = '-9223372036854775808'
const GARDENER_TOKEN = 'plant-history-gardener-4b7e'
const OPS_TOKEN = 'plant-history-ops-91c3'
/** TEST_TOKEN without a name (so `environment-1`), a named one, and an admin token to make stored ones. */
const TOKENS = [TEST_TOKEN, `name=gardener;scopes=plants:read+plants:write;${GARDENER_TOKEN}`, `name=ops;scopes=admin;${OPS_TOKEN}`]
const RETENTION_50_MS = { changes: { retentionMs: 50, streamsMax: 1000 } }

const historyLink = (id: string, after: bigint, limit: number) => `</plants/${id}/history?after=${after}&limit=${limit}>; rel="next"`

/** Makes a stored access token over HTTP and returns it. */
async function storedToken (app: FastifyInstance, name: string): Promise<{ id: string, token: string }> {
  const response = await app.inject({
    method: 'POST',
    url: '/admin/tokens',
    headers: { ...bearer(OPS_TOKEN), 'content-type': 'application/json' },
    payload: JSON.stringify({ name, scopes: ['plants:read', 'plants:write'] })
  })
  expect(response.statusCode, response.body).toBe(201)
  return response.json()
}

describe.each(backends)('A plant\'s history on $name', (backend) => {
  const shared = sharedTestApp(backend, { tokens: TOKENS })

  it('lists the plant\'s changes newest first, each naming its token: an environment token\'s name or environment-<n>, a stored token\'s, revoked since', async () => {
    const app = shared()
    const mobile = await storedToken(app, `mobile-sync-${backend.name}`)
    const head = await headOf(app)
    const from = Date.now()

    await expectStatuses(
      [() => postPlant(app, { id: 10, name: 'Fern', tag: 'shade' }), 200],
      [() => patch(app, '10', { tag: 'sun' }, bearer(GARDENER_TOKEN)), 200],
      [() => postPlant(app, { id: 11, name: 'Not this plant' }), 200],
      [() => put(app, '10', { name: 'Fern' }, bearer(mobile.token)), 200],
      [() => remove(app, '10', bearer(mobile.token)), 204],
      [() => app.inject({ method: 'DELETE', url: `/admin/tokens/${mobile.id}`, headers: bearer(OPS_TOKEN) }), 204]
    )
    const to = Date.now()

    expectPage(await read(app, '/plants/10/history'), {
      body: page(
        by(deleted(head + 5n, '10'), `mobile-sync-${backend.name}`),
        by(updated(head + 4n, '{"id":10,"name":"Fern"}'), `mobile-sync-${backend.name}`),
        by(updated(head + 2n, '{"id":10,"name":"Fern","tag":"sun"}'), 'gardener'),
        by(created(head + 1n, '{"id":10,"name":"Fern","tag":"shade"}'), 'environment-1')
      ),
      link: undefined,
      from,
      to
    })
  })

  it('keeps a deleted plant\'s history readable, and a PUT of its last version brings the plant back', async () => {
    const app = shared()
    const head = await headOf(app)
    const from = Date.now()
    await expectStatuses([() => postPlant(app, { id: 20, name: 'Rose', tag: 'red' }), 200], [() => remove(app, '20'), 204])
    expectError(await read(app, '/plants/20'), 404, 'no plant has id 20')
    const gone = await read(app, '/plants/20/history')

    await expectStatuses([() => put(app, '20', { name: 'Rose', tag: 'red' }), 201])
    const back = await read(app, '/plants/20/history')
    const to = Date.now()

    const rose = by(created(head + 1n, '{"id":20,"name":"Rose","tag":"red"}'), 'environment-1')
    const removed = by(deleted(head + 2n, '20'), 'environment-1')
    expectPage(gone, { body: page(removed, rose), link: undefined, from, to })
    expectPage(back, { body: page(by(created(head + 3n, '{"id":20,"name":"Rose","tag":"red"}'), 'environment-1'), removed, rose), link: undefined, from, to })
    expect((await read(app, '/plants/20')).body).toBe('{"id":20,"name":"Rose","tag":"red"}')
  })

  it('pages older changes through Link while more exist, keeping the limit; none on the last page, even when it is full', async () => {
    const app = shared()
    const head = await headOf(app)
    const from = Date.now()
    await expectStatuses(
      [() => postPlant(app, { id: 30, name: 'v1' }), 200],
      [() => patch(app, '30', { name: 'v2' }), 200],
      [() => postPlant(app, { id: 31, name: 'between' }), 200],
      [() => patch(app, '30', { name: 'v3' }), 200],
      [() => patch(app, '30', { name: 'v4' }), 200],
      [() => patch(app, '30', { name: 'v5' }), 200]
    )
    const to = Date.now()
    const version = (n: number, seq: bigint) => by((n === 1 ? created : updated)(seq, `{"id":30,"name":"v${n}"}`), 'environment-1')
    const [v1, v2, v3, v4, v5] = [version(1, head + 1n), version(2, head + 2n), version(3, head + 4n), version(4, head + 5n), version(5, head + 6n)]

    expectPage(await read(app, '/plants/30/history?limit=2'), { body: page(v5, v4), link: historyLink('30', head + 5n, 2), from, to })
    expectPage(await read(app, `/plants/30/history?after=${head + 5n}&limit=2`), { body: page(v3, v2), link: historyLink('30', head + 2n, 2), from, to })
    expectPage(await read(app, `/plants/30/history?after=${head + 2n}&limit=2`), { body: page(v1), link: undefined, from, to })
    expectPage(await read(app, '/plants/30/history?limit=5'), { body: page(v5, v4, v3, v2, v1), link: undefined, from, to })
    expectPage(await read(app, '/plants/30/history?limit=4'), { body: page(v5, v4, v3, v2), link: historyLink('30', head + 2n, 4), from, to })
    expectPage(await read(app, `/plants/30/history?after=${head + 1n}`), { body: '[]', link: undefined, from, to })
  })

  it('writes int64 ids and seq with every digit: the greatest id and the least', async () => {
    const app = shared()
    const head = await headOf(app)
    const from = Date.now()
    await expectStatuses(
      [() => postPlant(app, `{"id":${MAX},"name":"Max"}`), 200],
      [() => postPlant(app, `{"id":${MIN},"name":"Min","tag":"edge"}`), 200],
      [() => remove(app, MAX), 204]
    )
    const to = Date.now()

    expectPage(await read(app, `/plants/${MAX}/history`), {
      body: page(by(deleted(head + 3n, MAX), 'environment-1'), by(created(head + 1n, `{"id":${MAX},"name":"Max"}`), 'environment-1')), link: undefined, from, to
    })
    expectPage(await read(app, `/plants/${MIN}/history?limit=1`), {
      body: page(by(created(head + 2n, `{"id":${MIN},"name":"Min","tag":"edge"}`), 'environment-1')), link: undefined, from, to
    })
  })

  it('answers 404 for an id with neither a plant nor a kept change, also when asked for older changes', async () => {
    const app = shared()

    expectError(await read(app, '/plants/404/history'), 404, 'no plant has id 404')
    expectError(await read(app, '/plants/404/history?after=1000&limit=3'), 404, 'no plant has id 404')
  })
})

describe.each(backends)('A plant\'s history past CHANGES_RETENTION on $name', (backend) => {
  it('is [] for a plant whose changes were all pruned, and a 404 once the plant is deleted and its changes pruned', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store, config: RETENTION_50_MS })
    await expectStatuses(
      [() => postPlant(app, { id: 1, name: 'Fern' }), 200],
      [() => postPlant(app, { id: 2, name: 'Moss' }), 200],
      [() => remove(app, '2'), 204]
    )
    const written = Date.now()
    await untilPast(written, 50)

    // Retention may have pruned some already (its rounds run every second): this prunes what is left.
    await store.changes.prune(Date.now() - 50, 1000)

    expect(await store.changes.extent()).toEqual({ head: 3n, kept: 0, oldestSeq: undefined })
    expectPage(await read(app, '/plants/1/history'), { body: '[]', link: undefined, from: 0, to: 0 })
    expectError(await read(app, '/plants/2/history'), 404, 'no plant has id 2')
    expect(await headOf(app)).toBe(3n)
  })

  it('leaves out the changes past the retention that are not pruned yet, as the feed does: [] for a plant, 404 for a deleted one', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store: withoutPruning(store), config: RETENTION_50_MS })
    await expectStatuses(
      [() => postPlant(app, { id: 1, name: 'Fern' }), 200],
      [() => postPlant(app, { id: 2, name: 'Moss' }), 200],
      [() => remove(app, '2'), 204]
    )

    await untilPast(Date.now(), 50)

    expectPage(await read(app, '/plants/1/history'), { body: '[]', link: undefined, from: 0, to: 0 })
    expectError(await read(app, '/plants/2/history'), 404, 'no plant has id 2')
    expectError(await read(app, '/plants/2/history?after=3'), 404, 'no plant has id 2')
    expect(await store.changes.extent()).toEqual({ head: 3n, kept: 3, oldestSeq: 1n })
  })
})

describe.each(backends)('Who made a change, for an identity provider\'s token, on $name', (backend) => {
  let provider: IdentityProvider
  beforeAll(async () => {
    provider = await startIdentityProvider({ keys: [await generateSigningKey('ES256', 'history-ec')] })
  })
  afterAll(() => provider.close())

  it('names a JWT\'s change jwt:<sub>', async () => {
    const app = await buildTestApp({ store: await backend.open(), jwt: new JwtAccessTokens(jwtSettingsFor(provider)) })
    const token = await provider.sign(claimsFor(provider, { sub: 'inventory-sync@clients' }))
    const from = Date.now()

    await expectStatuses([() => postPlant(app, { id: 1, name: 'Fern' }, bearer(token)), 200])

    expectPage(await read(app, '/plants/1/history', bearer(token)), {
      body: page(by(created(1n, '{"id":1,"name":"Fern"}'), 'jwt:inventory-sync@clients')), link: undefined, from, to: Date.now()
    })
  })
})

describe('Who made a change, for a command', () => {
  it('names the changes of `plantstore import` cli', async () => {
    const cwd = temporaryFolder()
    const file = join(cwd, 'plants.db')
    writeFileSync(join(cwd, 'plants.ndjson'), '{"id":1,"name":"Fern","tag":"shade"}\n')
    const from = Date.now()

    const run = await runCli(['import', 'plants.ndjson'], { cwd, env: { DATABASE_URL: `sqlite:${file}` } })

    const to = Date.now()
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' })
    const app = await buildTestApp({ store: openSqliteStore(file) })
    expectPage(await read(app, '/plants/1/history'), {
      body: page(by(created(1n, '{"id":1,"name":"Fern","tag":"shade"}'), 'cli')), link: undefined, from, to
    })
  })
})
