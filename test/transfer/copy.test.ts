import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { digestToken } from '../../src/auth/tokens.js'
import { freePort } from '../../scripts/embedded-postgres.js'
import { openSqliteDatabase } from '../../src/store/sqlite/connection.js'
import Database from '../../src/store/sqlite/driver.js'
import { KNOWN_VERSION } from '../../src/store/sqlite/store-rows.js'
import { temporaryFolder } from '../helpers/app.js'
import { until } from '../helpers/load.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer, type ServerProcess } from '../helpers/server-process.js'
import { verifiesWith, WebhookReceiver } from '../helpers/webhook-receiver.js'
import {
  addPlants, cli, copy, expectFailure, exportDigest, markerOf, postgresQuery, shown, startCli, summaryLine, untilCopyingPlants
} from './copy-fixtures.js'

const SECRETS_KEY = randomBytes(32).toString('hex')
/** Deliveries to 127.0.0.1, retried quickly, signing secrets sealed under SECRETS_KEY. */
const WEBHOOK_ENV = { WEBHOOK_SECRETS_KEY: SECRETS_KEY, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_FIRST_MS: '100', WEBHOOK_RETRY_MAX_MS: '200' }
const EXPIRED_TOKEN = 'copy-test-expired-token-2b8d41'

type Api = (method: string, path: string, token: string, body?: unknown) => Promise<Response>

function apiOf (server: { baseUrl: string }): Api {
  return (method, path, token, body) => fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
}

/** Starts the service on a store no service has used, and reads the `initial-admin` token its first start prints. */
async function firstStart (databaseUrl: string, env: Record<string, string> = {}): Promise<{ server: ServerProcess & { baseUrl: string }, admin: string }> {
  const server = await startServer({ DATABASE_URL: databaseUrl, ...env })
  const printed = () => /^ {2}(pst_[A-Za-z0-9_-]{43})$/m.exec(server.stderr())?.[1]
  await until(() => printed() !== undefined, 10_000, 'the initial-admin token')
  return { server, admin: printed() as string }
}

async function createToken (api: Api, admin: string, body: { name: string, scopes: string[], expiresAt?: string }): Promise<{ id: string, token: string }> {
  const response = await api('POST', '/admin/tokens', admin, body)
  const created = await response.json() as { id: string, token: string }
  expect(response.status, JSON.stringify(created)).toBe(201)
  return created
}

async function stop (server: ServerProcess): Promise<void> {
  process.kill(server.child.pid as number, 'SIGTERM')
  expect(await server.exited).toBe(0)
}

/** Every row of the tables a copy moves, read exactly (integers as bigint, digests as bytes). */
function sqliteRows (file: string): { tokens: unknown[], subscriptions: unknown[], outbox: unknown[], attempts: unknown[] } {
  const db = new Database(file, { readonly: true })
  db.defaultSafeIntegers(true)
  try {
    const all = (table: string) => db.prepare(`SELECT * FROM ${table} ORDER BY id`).all()
    return {
      tokens: all('access_tokens'),
      subscriptions: all('webhook_subscriptions'),
      outbox: all('webhook_outbox'),
      attempts: all('webhook_attempts')
    }
  } finally {
    db.close()
  }
}

function fileDigest (file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex')
}

describe('plantstore copy', () => {
  it('moves a store SQLite → PostgreSQL → SQLite: the exports hash the same, tokens, subscriptions (a rotated secret with its predecessor), ' +
    'pending events and attempts arrive as they were, and a service on the PostgreSQL copy accepts the old tokens and delivers signed ' +
    'with both secrets', { timeout: 60_000 }, async () => {
    const folder = temporaryFolder()
    const source = join(folder, 'source.db')
    const receiver = await WebhookReceiver.start()
    receiver.answerWith(() => ({ status: 503 }))

    // The source: tokens live, expiring, revoked and expired; a subscription whose events wait, retried, with their attempts.
    const { server: first, admin } = await firstStart(`sqlite:${source}`, WEBHOOK_ENV)
    const sourceApi = apiOf(first)
    const reader = await createToken(sourceApi, admin, { name: 'reader', scopes: ['plants:read'] })
    const writer = await createToken(sourceApi, admin, { name: 'writer', scopes: ['plants:read', 'plants:write'], expiresAt: new Date(Date.now() + 86_400_000).toISOString() })
    const revoked = await createToken(sourceApi, admin, { name: 'revoked', scopes: ['plants:read'] })
    expect((await sourceApi('DELETE', `/admin/tokens/${revoked.id}`, admin)).status).toBe(204)
    const subscribed = await sourceApi('POST', '/admin/webhooks', admin, { url: receiver.url })
    const subscription = await subscribed.json() as { id: string, secret: string }
    expect(subscribed.status).toBe(201)
    receiver.useSecret(subscription.secret)
    for (let id = 900_001; id <= 900_005; id++) expect((await sourceApi('POST', '/plants', writer.token, { id, name: `Hook ${id}` })).status).toBe(200)
    await receiver.waitForDeliveries(10)
    const rotation = await sourceApi('POST', `/admin/webhooks/${subscription.id}/rotate-secret`, admin, { expiresInSeconds: 3600 })
    const rotated = await rotation.json() as { secret: string }
    expect(rotation.status).toBe(200)
    receiver.useSecret(rotated.secret)
    await stop(first)
    const db = openSqliteDatabase(source)
    db.prepare('INSERT INTO access_tokens (id, name, scopes, sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(randomUUID(), 'expired', 'plants:read', digestToken(EXPIRED_TOKEN), '2025-01-01T00:00:00.123Z', '2025-02-01T00:00:00.456Z')
    db.close()
    addPlants(source, 12_345)
    const before = sqliteRows(source)
    expect(before.outbox).toHaveLength(5)
    expect(before.subscriptions).toEqual([expect.objectContaining({
      secret: expect.stringMatching(/^sealed:v1:/), previous_secret: expect.stringMatching(/^sealed:v1:/), previous_secret_until: expect.any(BigInt)
    })])
    const copied = { tokens: 5, subscriptions: 1, plants: 12_350, events: 5, attempts: before.attempts.length, changes: 5 }

    const postgres = await createTestDatabase()
    const back = join(folder, 'back.db')
    const there = await copy(`sqlite:${source}`, postgres, folder)
    const andBack = await copy(postgres, `sqlite:${back}`, folder)

    expect({ code: there.code, stderr: there.stderr }).toEqual({ code: 0, stderr: '' })
    expect(there.stdout).toMatch(summaryLine(copied, `sqlite:${source}`, shown(postgres)))
    expect({ code: andBack.code, stderr: andBack.stderr }).toEqual({ code: 0, stderr: '' })
    expect(andBack.stdout).toMatch(summaryLine(copied, shown(postgres), `sqlite:${back}`))
    const digests = [await exportDigest(`sqlite:${source}`), await exportDigest(postgres), await exportDigest(`sqlite:${back}`)]
    console.log(`copy round trip: export sha256 source ${digests[0]?.sha256}, PostgreSQL ${digests[1]?.sha256}, back ${digests[2]?.sha256}`)
    expect(digests).toEqual([{ sha256: digests[0]?.sha256, lines: 12350 }, digests[0], digests[0]])
    // Leases are the source dispatcher's: the copies start unleased, so the target's dispatcher claims them at once.
    expect(sqliteRows(back)).toEqual({ ...before, outbox: before.outbox.map((row) => ({ ...row as object, lease_until: 0n, lease_owner: null })) })
    expect(await postgresQuery(postgres, 'SELECT revision FROM access_token_revision')).toEqual([{ revision: '1' }])
    const tokensAt = async (url: string) => (await cli(['tokens', 'list', '--json'], folder, { DATABASE_URL: url })).stdout
    expect(await tokensAt(postgres)).toBe(await tokensAt(`sqlite:${source}`))

    receiver.answerWith(() => ({ status: 204 }))
    const deliveredBefore = receiver.deliveries.length
    const second = await startServer({ DATABASE_URL: postgres, ...WEBHOOK_ENV })
    const api = apiOf(second)
    const statuses = {
      reader: (await api('GET', '/plants/900001', reader.token)).status,
      writer: (await api('POST', '/plants', writer.token, { id: 900_100, name: 'After the move' })).status,
      admin: (await api('GET', '/admin/tokens', admin)).status,
      revoked: (await api('GET', '/plants/900001', revoked.token)).status,
      expired: (await api('GET', '/plants/900001', EXPIRED_TOKEN)).status
    }
    const delivered = () => receiver.deliveries.slice(deliveredBefore)
    await until(() => new Set(delivered().map((delivery) => delivery.body)).size === 6, 15_000, 'the six events delivered')
    const history = await (await api('GET', `/admin/webhooks/${subscription.id}/deliveries?limit=1000`, admin)).json() as Array<{ id: string }>

    expect(statuses).toEqual({ reader: 200, writer: 200, admin: 200, revoked: 401, expired: 401 })
    expect(second.stderr()).not.toContain('initial-admin')
    expect(delivered().filter((delivery) => !delivery.verified)).toEqual([])
    expect(delivered().filter((delivery) => !verifiesWith(delivery, subscription.secret))).toEqual([])
    expect(new Set(delivered().map((delivery) => delivery.body))).toEqual(new Set([
      ...[900_001, 900_002, 900_003, 900_004, 900_005].map((id) => `{"id":${id},"name":"Hook ${id}"}`), '{"id":900100,"name":"After the move"}'
    ]))
    expect(history.map((attempt) => BigInt(attempt.id))).toEqual(expect.arrayContaining(before.attempts.map((row) => (row as { id: bigint }).id)))
  })

  it('interrupted by kill -9 (SQLite → PostgreSQL) and by Ctrl-C (PostgreSQL → SQLite), finishes when the same command runs again; ' +
    'PostgreSQL → PostgreSQL too', { timeout: 90_000 }, async () => {
    const folder = temporaryFolder()
    const source = join(folder, 'source.db')
    addPlants(source, 100_000)
    const postgres = await createTestDatabase()
    const back = join(folder, 'back.db')
    const resumed = (from: string, to: string) => summaryLine({ plants: 100_000 }, from, to, '; this run finished the copy started ',
      '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z')

    const killed = startCli(['copy', '--from', `sqlite:${source}`, '--to', postgres], folder)
    await untilCopyingPlants(postgres)
    process.kill(killed.child.pid as number, 'SIGKILL')
    expect((await killed.done).signal).toBe('SIGKILL')
    const atKill = await postgresQuery<{ count: string }>(postgres, 'SELECT count(*) FROM plants')
    const afterKill = await copy(`sqlite:${source}`, postgres, folder)

    const interrupted = startCli(['copy', '--from', postgres, '--to', `sqlite:${back}`], folder)
    await untilCopyingPlants(`sqlite:${back}`)
    process.kill(interrupted.child.pid as number, 'SIGINT')
    const interruptedRun = await interrupted.done
    const markerAtInterruption = await markerOf(`sqlite:${back}`)
    const afterInterruption = await copy(postgres, `sqlite:${back}`, folder)
    const postgresCopy = await createTestDatabase()
    const postgresToPostgres = await copy(postgres, postgresCopy, folder)

    expect(Number(atKill[0]?.count)).toBeGreaterThan(0)
    expect(Number(atKill[0]?.count)).toBeLessThan(100_000)
    expect({ code: afterKill.code, stderr: afterKill.stderr }).toEqual({ code: 0, stderr: '' })
    expect(afterKill.stdout).toMatch(resumed(`sqlite:${source}`, shown(postgres)))
    expect(interruptedRun).toEqual({
      code: 130,
      signal: null,
      stdout: '',
      stderr: 'plantstore: interrupted by SIGINT; the rows copied so far are kept: run the same command again to finish the copy\n'
    })
    expect(markerAtInterruption).toMatchObject({ copying: 'plants', finished_at: null })
    expect({ code: afterInterruption.code, stderr: afterInterruption.stderr }).toEqual({ code: 0, stderr: '' })
    expect(afterInterruption.stdout).toMatch(resumed(shown(postgres), `sqlite:${back}`))
    expect({ code: postgresToPostgres.code, stderr: postgresToPostgres.stderr }).toEqual({ code: 0, stderr: '' })
    expect(postgresToPostgres.stdout).toMatch(summaryLine({ plants: 100_000 }, shown(postgres), shown(postgresCopy)))
    const digests = [`sqlite:${source}`, postgres, `sqlite:${back}`, postgresCopy].map(exportDigest)
    const expected = await digests[0]
    expect(expected?.lines).toBe(100_000)
    expect(await Promise.all(digests)).toEqual([expected, expected, expected, expected])
  })

  it('copies a store of schema version 5 (release 1.5.0), SQLite or PostgreSQL, its subscriptions without a previous secret', async () => {
    const folder = temporaryFolder()
    const source = join(folder, 'source.db')
    const target = join(folder, 'target.db')
    addPlants(source, 3)
    const db = openSqliteDatabase(source)
    db.prepare('INSERT INTO webhook_subscriptions (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)')
      .run('5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60', 'https://example.com/hooks', 'plant.created', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw1u3E4ERhSGs=', 1_700_000_000_000)
    db.exec('DROP INDEX webhook_outbox_subscription_due; ALTER TABLE webhook_subscriptions DROP COLUMN previous_secret; ALTER TABLE webhook_subscriptions DROP COLUMN previous_secret_until')
    db.pragma('user_version = 5')
    db.close()

    const postgres = await createTestDatabase()
    const fromPostgres = join(folder, 'from-postgres.db')

    const run = await copy(`sqlite:${source}`, `sqlite:${target}`, folder)
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' })
    expect((await copy(`sqlite:${source}`, postgres, folder)).code).toBe(0)
    await postgresQuery(postgres, 'ALTER TABLE webhook_subscriptions DROP COLUMN previous_secret, DROP COLUMN previous_secret_until')
    await postgresQuery(postgres, 'DROP INDEX webhook_outbox_subscription_due')
    await postgresQuery(postgres, 'DELETE FROM plantstore_migrations WHERE version >= 6')
    const fromVersion5 = await copy(postgres, `sqlite:${fromPostgres}`, folder)

    expect(run.stdout).toMatch(summaryLine({ subscriptions: 1, plants: 3 }, `sqlite:${source}`, `sqlite:${target}`))
    expect({ code: fromVersion5.code, stderr: fromVersion5.stderr }).toEqual({ code: 0, stderr: '' })
    expect(sqliteRows(fromPostgres).subscriptions).toEqual(sqliteRows(target).subscriptions)
    expect(sqliteRows(target).subscriptions).toEqual([{
      id: '5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60',
      url: 'https://example.com/hooks',
      events: 'plant.created',
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw1u3E4ERhSGs=',
      created_at: 1_700_000_000_000n,
      disabled_at: null,
      disabled_reason: null,
      delivered: 0n,
      failed: 0n,
      last_error: null,
      last_error_at: null,
      previous_secret: null,
      previous_secret_until: null
    }])
  })

  it('refuses a target that holds data, even only the initial-admin token of a first start, and leaves it untouched; --merge adds to it', async () => {
    const folder = temporaryFolder()
    const source = join(folder, 'source.db')
    const target = join(folder, 'target.db')
    addPlants(source, 10)
    const { server } = await firstStart(`sqlite:${target}`)
    await stop(server)
    const untouched = fileDigest(target)

    const refused = await copy(`sqlite:${source}`, `sqlite:${target}`, folder)
    const unchanged = fileDigest(target)
    const merged = await copy(`sqlite:${source}`, `sqlite:${target}`, folder, '--merge')

    expectFailure(refused, `plantstore: the target sqlite:${target} holds data: 1 access token, "initial-admin", which the first start of a service ` +
      'on it made; nothing was copied: copy into an empty store, or give --merge to add the source\'s rows to what it holds')
    expect(unchanged).toBe(untouched)
    expect({ code: merged.code, stderr: merged.stderr }).toEqual({ code: 0, stderr: '' })
    expect(merged.stdout).toMatch(summaryLine({ plants: 10 }, `sqlite:${source}`, `sqlite:${target}`))
    expect(await exportDigest(`sqlite:${target}`)).toEqual(await exportDigest(`sqlite:${source}`))
  })

  it('with --merge into PostgreSQL under a running service, adds what the target lacks, skips what it holds, keeps and reports ' +
    'what it holds otherwise, and the service accepts the copied tokens', { timeout: 30_000 }, async () => {
    const folder = temporaryFolder()
    const source = join(folder, 'source.db')
    const sourceUrl = `sqlite:${source}`
    const created = async (name: string) =>
      JSON.parse((await cli(['tokens', 'create', '--name', name, '--scopes', 'plants:read', '--json'], folder, { DATABASE_URL: sourceUrl })).stdout) as { id: string, token: string }
    const reader = await created('reader')
    const sourceCi = await created('ci')
    const db = openSqliteDatabase(source)
    db.exec("INSERT INTO plants (id, name, tag) VALUES (1, 'Fern', 'green'), (5, 'Fern', 'green'), (6, 'Moss', NULL), (7, 'Ivy', '')")
    db.close()
    const postgres = await createTestDatabase()
    const { server, admin } = await firstStart(postgres)
    const api = apiOf(server)
    for (const plant of [{ id: 5, name: 'Ivy' }, { id: 6, name: 'Moss' }, { id: 100, name: 'Target only', tag: 't' }]) {
      expect((await api('POST', '/plants', admin, plant)).status).toBe(200)
    }
    const targetCi = await createToken(api, admin, { name: 'ci', scopes: ['plants:read'] })
    const exportBefore = await exportDigest(postgres)

    const refused = await copy(sourceUrl, postgres, folder)
    const exportAfterRefusal = await exportDigest(postgres)
    const markersAfterRefusal = await postgresQuery(postgres, 'SELECT * FROM store_copy')
    const merged = await copy(sourceUrl, postgres, folder, '--merge')
    let readerStatus = 0
    for (const deadline = Date.now() + 5000; readerStatus !== 200 && Date.now() < deadline;) {
      readerStatus = (await api('GET', '/plants/1', reader.token)).status
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const exported = await (await api('GET', '/admin/export', admin)).text()
    const mergedAgain = await copy(sourceUrl, postgres, folder, '--merge')

    expectFailure(refused, `plantstore: the target ${shown(postgres)} holds data: 3 plants, 2 access tokens ("initial-admin", "ci"), ` +
      'a change log numbered up to 3; nothing was copied: ' +
      'copy into an empty store, or give --merge to add the source\'s rows to what it holds')
    expect(exportAfterRefusal).toEqual(exportBefore)
    expect(markersAfterRefusal).toEqual([])
    const conflicts = `plantstore: access token ${sourceCi.id} ("ci"): the target has a live token of that name (id ${targetCi.id}), ` +
      'and two live tokens may not share a name; not copied\n' +
      'plantstore: plant 5: the target holds {"id":5,"name":"Ivy"}, the source {"id":5,"name":"Fern","tag":"green"}; kept the target\'s\n'
    expect({ code: merged.code, stderr: merged.stderr }).toEqual({ code: 1, stderr: conflicts })
    expect(merged.stdout).toMatch(summaryLine({ tokens: 1, plants: 2 }, sourceUrl, shown(postgres),
      '; already in the target as they are, skipped: 1 plant; kept as the target has them (each listed on stderr when found): 1 access token, 1 plant'))
    expect(readerStatus).toBe(200)
    expect(exported).toBe('{"id":1,"name":"Fern","tag":"green"}\n{"id":5,"name":"Ivy"}\n{"id":6,"name":"Moss"}\n{"id":7,"name":"Ivy","tag":""}\n' +
      '{"id":100,"name":"Target only","tag":"t"}\n')
    expect({ code: mergedAgain.code, stderr: mergedAgain.stderr }).toEqual({ code: 1, stderr: conflicts })
    expect(mergedAgain.stdout).toMatch(summaryLine({}, sourceUrl, shown(postgres),
      '; already in the target as they are, skipped: 1 access token, 3 plants; kept as the target has them (each listed on stderr when found): 1 access token, 1 plant'))
  })

  it('lists 20 conflicts of a --merge one line each, counts the rest, and refuses a target that holds an unfinished copy of another store', async () => {
    const folder = temporaryFolder()
    const source = join(folder, 'source.db')
    const target = join(folder, 'target.db')
    const other = join(folder, 'other.db')
    for (const [file, name] of [[source, 'Fern'], [target, 'Ivy']] as const) {
      const db = openSqliteDatabase(file)
      db.exec(`WITH RECURSIVE n (id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM n WHERE id < 25) INSERT INTO plants (id, name) SELECT id, '${name}' FROM n`)
      db.close()
    }
    const db = openSqliteDatabase(other)
    db.exec("INSERT INTO store_copy VALUES (1, 'sqlite:/elsewhere/source.db', 1700000000000, NULL, 'plants', '42', '{}')")
    db.close()

    const merged = await copy(`sqlite:${source}`, `sqlite:${target}`, folder, '--merge')
    const refused = await copy(`sqlite:${source}`, `sqlite:${other}`, folder)

    expect(merged.code).toBe(1)
    expect(merged.stderr).toBe(Array.from({ length: 20 }, (_, index) =>
      `plantstore: plant ${index + 1}: the target holds {"id":${index + 1},"name":"Ivy"}, the source {"id":${index + 1},"name":"Fern"}; kept the target's\n`).join('') +
      'plantstore: … and 5 more rows kept as the target has them, not listed\n')
    expect(merged.stdout).toMatch(summaryLine({}, `sqlite:${source}`, `sqlite:${target}`, '; kept as the target has them (each listed on stderr when found): 25 plants'))
    expectFailure(refused, `plantstore: the target sqlite:${other} holds an unfinished copy of sqlite:/elsewhere/source.db, started 2023-11-14T22:13:20.000Z: ` +
      'nothing was copied; run that copy\'s command again to finish it, or give --merge to copy this store into it as well')
  })

  describe('fails with one line, and changes nothing, when', () => {
    it('the source SQLite file does not exist: no file is made', async () => {
      const folder = temporaryFolder()
      const missing = join(folder, 'missing.db')
      const target = join(folder, 'target.db')

      const run = await copy(`sqlite:${missing}`, `sqlite:${target}`, folder)

      expectFailure(run, `plantstore: the source sqlite:${missing}: no such file: give the path of an existing store (nothing was created)`)
      expect([existsSync(missing), existsSync(target)]).toEqual([false, false])
    })

    it('the target PostgreSQL is down, or the source: the line names it without its password', async () => {
      const folder = temporaryFolder()
      const source = join(folder, 'source.db')
      addPlants(source, 3)
      const port = await freePort()
      const down = `postgres://plantstore:s3cret-pw@127.0.0.1:${port}/nowhere`

      const toDown = await copy(`sqlite:${source}`, down, folder)
      const fromDown = await copy(down, `sqlite:${join(folder, 'target.db')}`, folder)

      expectFailure(toDown, `plantstore: the target postgres://plantstore@127.0.0.1:${port}/nowhere: PostgreSQL is unavailable (connect ECONNREFUSED 127.0.0.1:${port})`)
      expectFailure(fromDown, `plantstore: the source postgres://plantstore@127.0.0.1:${port}/nowhere: PostgreSQL is unavailable (connect ECONNREFUSED 127.0.0.1:${port})`)
      expect(existsSync(join(folder, 'target.db'))).toBe(false)
    })

    it('a password is wrong: the line does not show it', async () => {
      const folder = temporaryFolder()
      const source = join(folder, 'source.db')
      addPlants(source, 3)
      const url = new URL(await createTestDatabase())
      url.password = 'wrong-pw-5e1a'

      const run = await copy(`sqlite:${source}`, url.toString(), folder)

      expectFailure(run, `plantstore: the target ${shown(url.toString())}: password authentication failed for user "${url.username}"`)
    })

    it('a schema is newer than this release, or older than the copy reads, the source is not a plantstore store, or both name the same store', async () => {
      const folder = temporaryFolder()
      const future = join(folder, 'future.db')
      const source = join(folder, 'source.db')
      const empty = join(folder, 'empty.db')
      addPlants(source, 3)
      const db = openSqliteDatabase(future)
      db.pragma('user_version = 99')
      db.close()
      writeFileSync(empty, '')
      const release1 = join(folder, 'release-1.0.0.db')
      copyFileSync(new URL('../fixtures/release-1.0.0.db', import.meta.url), release1)
      const tooNew = `the database schema is at version 99, newer than this plantstore knows (${KNOWN_VERSION}); ` +
        'run a plantstore release at least as new as the one that last opened it'

      expectFailure(await copy(`sqlite:${future}`, `sqlite:${join(folder, 'a.db')}`, folder), `plantstore: the source sqlite:${future}: ${tooNew}`)
      expectFailure(await copy(`sqlite:${source}`, `sqlite:${future}`, folder), `plantstore: the target sqlite:${future}: ${tooNew}`)
      expectFailure(await copy(`sqlite:${empty}`, `sqlite:${join(folder, 'a.db')}`, folder), `plantstore: the source sqlite:${empty}: it holds no plantstore store (no schema version)`)
      expectFailure(await copy(`sqlite:${release1}`, `sqlite:${join(folder, 'a.db')}`, folder), `plantstore: the source sqlite:${release1}: its schema is at ` +
        'version 1, older than the copy reads (4): start this release\'s service on it once to bring it up to date, then copy it')
      expectFailure(await copy(`sqlite:${source}`, `sqlite:${folder}/./source.db`, folder), `plantstore: --from and --to name the same store, sqlite:${source}`)
      expect(existsSync(join(folder, 'a.db'))).toBe(false)
    })
  })
})
