/**
 * Change streams of several instances sharing one PostgreSQL database (two apps in this process, each
 * with its own store and follower): a change written through one reaches a stream on the other within
 * 2 s, woken by NOTIFY, or, behind a pooler in transaction mode (no LISTEN), by the follower's poll; and
 * a stream that starts at the head starts after what the other instance committed, even before this
 * instance's follower has read it; and a token revoked through one ends its stream on the other.
 */
import type { FastifyInstance } from 'fastify'
import { describe, expect, it, onTestFinished } from 'vitest'
import { buildApp, type AppConfig } from '../../src/app.js'
import { AccessTokenRegistry, TOKEN_POLL_MS } from '../../src/auth/token-registry.js'
import { parseTokenList } from '../../src/auth/tokens.js'
import { DEFAULT_CHANGES_CONFIG } from '../../src/config.js'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import type { PostgresOptions } from '../../src/store/postgres/store.js'
import { bearer, buildTestApp, TEST_POSTGRES_OPTIONS, TEST_TOKEN } from '../helpers/app.js'
import { changeHead, openChangeStream, openLiveStream, putPlant } from '../helpers/change-streams.js'
import { seqsOf } from '../helpers/event-stream.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

const PROPAGATION_LIMIT_MS = 2000
const ADMIN_TOKEN = 'change-streams-instances-admin-7f3e0a'
const WRITES = 3

/** An app on `url`, listening on 127.0.0.1, with its streams' follower polling every `pollMs`. */
async function instance (url: string, options: { pollMs?: number, store?: Partial<PostgresOptions> } = {}): Promise<{ app: FastifyInstance, baseUrl: string }> {
  const changes: NonNullable<AppConfig['changes']> = { ...DEFAULT_CHANGES_CONFIG, ...(options.pollMs === undefined ? {} : { pollMs: options.pollMs }) }
  const app = await buildTestApp({ store: await openPostgresStore(url, { ...TEST_POSTGRES_OPTIONS, ...options.store }), config: { changes } })
  return { app, baseUrl: await app.listen({ host: '127.0.0.1', port: 0 }) }
}

/** Writes plants through `writer` one at a time; each must reach the stream on the other instance within 2 s. The slowest, in ms. */
async function expectEachWithin2s (writer: FastifyInstance, readerUrl: string, firstId: number): Promise<number> {
  const stream = await openLiveStream(readerUrl)
  const delays: number[] = []
  for (let index = 0; index < WRITES; index++) {
    await putPlant(writer, firstId + index, { name: `written elsewhere ${index}` })
    const answeredAt = performance.now()
    const head = await changeHead(writer)
    await stream.waitFor(`the change of seq ${head}`, () => stream.events.at(-1)?.lastEventId === String(head), PROPAGATION_LIMIT_MS + 3000)
    delays.push(performance.now() - answeredAt)
  }
  expect(Math.max(...delays)).toBeLessThanOrEqual(PROPAGATION_LIMIT_MS)
  expect(seqsOf(stream.events)).toHaveLength(WRITES)
  return Math.max(...delays)
}

/** An app on `url` whose access tokens follow the store, as the service's do (server.ts): revocations through another instance reach it. */
async function instanceFollowingTokens (url: string): Promise<{ app: FastifyInstance, baseUrl: string }> {
  const store = await openPostgresStore(url, TEST_POSTGRES_OPTIONS)
  const accessTokens = new AccessTokenRegistry(store.tokens, parseTokenList(`${TEST_TOKEN},name=ops;scopes=admin;${ADMIN_TOKEN}`))
  await accessTokens.refresh()
  accessTokens.watch(TOKEN_POLL_MS, () => {})
  const app = await buildApp({ bodyLimit: 16384, logLevel: 'silent', prettyLogs: false }, { store, accessTokens })
  onTestFinished(() => app.close())
  return { app, baseUrl: await app.listen({ host: '127.0.0.1', port: 0 }) }
}

describe('Change streams of two instances on one PostgreSQL database', () => {
  it('given a stream on instance A, whose follower only polls every minute, when plants are written through instance B, then each reaches the stream within 2 s (NOTIFY)', async () => {
    const url = await createTestDatabase()
    const a = await instance(url, { pollMs: 60_000 })
    const b = await instance(url)

    const slowestMs = await expectEachWithin2s(b.app, a.baseUrl, 1)
    console.info(`NOTIFY: the slowest of ${WRITES} changes reached the other instance's stream ${slowestMs.toFixed(0)} ms after its write's answer`)
  })

  it('given instance A behind a pooler in transaction mode (no LISTEN), when plants are written through instance B, then each reaches A\'s stream within 2 s (the poll)', async () => {
    const url = await createTestDatabase()
    const a = await instance(url, { store: { pooling: 'transaction' } })
    const b = await instance(url)

    const slowestMs = await expectEachWithin2s(b.app, a.baseUrl, 1)
    console.info(`poll: the slowest of ${WRITES} changes reached the other instance's stream ${slowestMs.toFixed(0)} ms after its write's answer`)
  })

  it('given A\'s follower not yet aware of a change B committed, when a stream opens on A without after, then it starts after that change (at the head), while an older stream gets it', async () => {
    const url = await createTestDatabase()
    // No LISTEN and no poll within the test: A learns of B's commits only when A itself writes.
    const a = await instance(url, { store: { pooling: 'transaction' }, pollMs: 60_000 })
    const b = await instance(url)
    const older = await openLiveStream(a.baseUrl)
    await putPlant(b.app, 1, { name: 'Committed through B' })
    const committedThroughB = await changeHead(b.app)

    const opened = await openLiveStream(a.baseUrl)
    await putPlant(a.app, 2, { name: 'Committed through A' })

    await older.waitForEvents(2)
    expect(seqsOf(older.events)).toEqual([committedThroughB, committedThroughB + 1])
    expect(seqsOf(await opened.waitForEvents(1))).toEqual([committedThroughB + 1])
  })

  it('given a stream on instance A with a stored token, when the token is revoked through instance B, then the stream on A ends within 2 s', async () => {
    const url = await createTestDatabase()
    const a = await instanceFollowingTokens(url)
    const b = await instanceFollowingTokens(url)
    const created = await b.app.inject({
      method: 'POST', url: '/admin/tokens', headers: { ...bearer(ADMIN_TOKEN), 'content-type': 'application/json' }, payload: { name: 'follower', scopes: ['plants:read'] }
    })
    expect(created.statusCode, created.body).toBe(201)
    const { id, token } = created.json() as { id: string, token: string }
    await expect.poll(async () => {
      const stream = await openChangeStream(a.baseUrl, '', bearer(token))
      if (stream.status !== 200) await stream.body()
      else stream.close()
      return stream.status
    }, { timeout: PROPAGATION_LIMIT_MS + 3000, interval: 100 }).toBe(200)
    const stream = await openLiveStream(a.baseUrl, '', bearer(token))

    const revoked = await b.app.inject({ method: 'DELETE', url: `/admin/tokens/${id}`, headers: bearer(ADMIN_TOKEN) })
    expect(revoked.statusCode).toBe(204)
    const revokedAt = performance.now()

    const ending = await Promise.race([stream.ended, new Promise<undefined>((resolve) => { setTimeout(() => { resolve(undefined) }, PROPAGATION_LIMIT_MS + 3000) })])
    expect(ending, 'the stream on A did not end').toBeDefined()
    expect((ending?.atMs ?? Infinity) - revokedAt).toBeLessThanOrEqual(PROPAGATION_LIMIT_MS)
  })
})
