import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import type { DestinationStream } from 'pino'
import { afterAll, beforeAll, expect, onTestFinished } from 'vitest'
import { buildApp, type AppConfig } from '../../src/app.js'
import type { LogLevel } from '../../src/config.js'
import { CAPTURED_LOG_LEVEL, capturedLogStream } from './log-capture.js'
import type { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import { AccessTokenRegistry } from '../../src/auth/token-registry.js'
import { parseTokenList } from '../../src/auth/tokens.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { openPostgresStore, type PostgresOptions } from '../../src/store/postgres/store.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { createSuiteDatabase, createTestDatabase } from './postgres-database.js'

export const TEST_TOKEN = 'plantstore-test-token-5f1c2a'

export interface TestAppOptions {
  readonly store?: PlantStore
  readonly config?: Partial<AppConfig>
  /**
   * Accepted tokens as PLANTSTORE_TOKENS entries (`name=…;scopes=…;token`); TEST_TOKEN, with the plant
   * scopes, by default; none (only the store's tokens) for an empty list.
   */
  readonly tokens?: readonly string[]
  readonly logStream?: DestinationStream
  /** JWT access tokens from a test identity provider, accepted next to the service tokens. */
  readonly jwt?: JwtAccessTokens
}

/** Builds the production app on a fresh store and closes it (and so the store) when the test ends. */
export async function buildTestApp (options: TestAppOptions = {}): Promise<FastifyInstance> {
  const app = await buildUnownedApp(options)
  onTestFinished(() => app.close())
  return app
}

/** Builds the production app as buildTestApp does; whoever receives it closes it (and so its store). */
async function buildUnownedApp (options: TestAppOptions): Promise<FastifyInstance> {
  const store = options.store ?? openMemoryStore()
  const entries = options.tokens ?? [TEST_TOKEN]
  const accessTokens = new AccessTokenRegistry(store.tokens, entries.length === 0 ? [] : parseTokenList(entries.join(',')))
  await accessTokens.refresh()
  return buildApp(
    { bodyLimit: 16384, logLevel: (CAPTURED_LOG_LEVEL as LogLevel | undefined) ?? 'silent', prettyLogs: false, ...options.config },
    {
      store,
      accessTokens,
      ...(options.jwt === undefined ? {} : { jwtAccessTokens: options.jwt }),
      ...(options.logStream !== undefined
        ? { logStream: options.logStream }
        : CAPTURED_LOG_LEVEL !== undefined ? { logStream: capturedLogStream() } : {})
    })
}

/**
 * One app on one fresh store of `backend` for every test of the enclosing `describe`: built before its
 * first test, closed with its store after its last. Call it in the body of a `describe`; each test takes
 * the app with the function it returns.
 *
 * An app and a fresh store cost 0.1 s (memory) to 0.4 s (SQLite: the writer thread, migrations, fsyncs)
 * per test, so the tests of a rule share one. They stay independent because each uses ids no other test
 * of the suite uses, or first deletes the plants of the ids it needs (withoutPlants). A test that needs
 * an empty store, a store no other test wrote to, or another configuration builds its own (buildTestApp).
 */
export function sharedTestApp (backend: Backend, options: Omit<TestAppOptions, 'store'> = {}): () => FastifyInstance {
  let app: FastifyInstance | undefined
  let remove = async () => {}
  beforeAll(async () => {
    const opened = await backend.openForSuite()
    remove = opened.remove
    try {
      app = await buildUnownedApp({ ...options, store: opened.store })
    } catch (error) {
      await opened.store.close()
      throw error
    }
  })
  afterAll(async () => {
    await app?.close()
    await remove()
  })
  return () => {
    if (app === undefined) throw new Error('the shared app is built before the first test of its describe: take it inside a test')
    return app
  }
}

/**
 * For a test on a shared app whose point is one particular id (an int64 edge, say) that another test of
 * the suite uses too: deletes those plants, where stored, before the test uses the ids, so it starts as
 * on a fresh store whatever ran before it. Ids in canonical form, as DELETE /plants/{id} takes them.
 */
export async function withoutPlants (app: FastifyInstance, ...ids: readonly string[]): Promise<FastifyInstance> {
  for (const id of ids) {
    const response = await app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: bearer() })
    expect([204, 404], `DELETE /plants/${id} before the test: ${response.body}`).toContain(response.statusCode)
  }
  return app
}

/** A temporary folder removed when the test ends. */
export function temporaryFolder (): string {
  const folder = mkdtempSync(join(tmpdir(), 'plantstore-test-'))
  onTestFinished(() => rmSync(folder, { recursive: true, force: true }))
  return folder
}

export const TEST_POSTGRES_OPTIONS: PostgresOptions = { poolSize: 4, connectTimeoutMs: 2000, statementTimeoutMs: 5000 }

export interface Backend {
  readonly name: string
  /** Opens a fresh, empty store of this backend; whoever receives it closes it. */
  open (): Promise<PlantStore>
  /**
   * Opens a fresh, empty store for a whole suite (in `beforeAll`, where `open`'s clean-up, tied to the
   * running test, cannot be): whoever receives it closes it, then calls `remove` for what it left behind.
   */
  openForSuite (): Promise<SuiteStore>
}

export interface SuiteStore {
  readonly store: PlantStore
  /** Removes the store's files or database, once the store (or the app holding it) is closed. */
  readonly remove: () => Promise<void>
}

/** The in-memory store: what buildTestApp uses when given no store. */
export const memoryBackend: Backend = {
  name: 'memory',
  open: async () => openMemoryStore(),
  openForSuite: async () => ({ store: openMemoryStore(), remove: async () => {} })
}

/** Every backend the HTTP suites and the store contract run over. */
export const backends: readonly Backend[] = [
  memoryBackend,
  {
    name: 'sqlite',
    open: async () => openSqliteStore(join(temporaryFolder(), 'plants.db')),
    openForSuite: async () => {
      const folder = mkdtempSync(join(tmpdir(), 'plantstore-test-'))
      return { store: openSqliteStore(join(folder, 'plants.db')), remove: async () => { rmSync(folder, { recursive: true, force: true }) } }
    }
  },
  {
    name: 'postgres',
    open: async () => openPostgresStore(await createTestDatabase(), TEST_POSTGRES_OPTIONS),
    openForSuite: async () => {
      const { url, drop } = await createSuiteDatabase()
      return { store: await openPostgresStore(url, TEST_POSTGRES_OPTIONS), remove: drop }
    }
  }
]

export const bearer = (token = TEST_TOKEN) => ({ authorization: `Bearer ${token}` })

/** POST /plants with a JSON body given as a value or as raw text (for exact int64 literals). */
export function postPlant (
  app: FastifyInstance,
  body: unknown,
  headers: Record<string, string> = {}
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: '/plants',
    headers: { 'content-type': 'application/json', ...bearer(), ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body)
  } satisfies InjectOptions)
}

/** Asserts an `Error` envelope: the status, `error` equal to it, the exact message, JSON, a request id. */
export function expectError (response: LightMyRequestResponse, status: number, message: string | RegExp): void {
  expect({ status: response.statusCode, body: response.json() }).toEqual({
    status,
    body: { error: status, message: typeof message === 'string' ? message : expect.stringMatching(message) }
  })
  expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
  expect(response.headers['x-request-id']).toMatch(/^[\x21-\x7e]{1,128}$/)
}

/**
 * Proves through HTTP that nothing is stored under `id`: a create with a name no test uses must come
 * back as created (a stored plant would make it a 409). The probe is then deleted, so the id stays free
 * (a second proof, or the next test on a shared app, finds it so).
 */
export async function expectNothingStored (app: FastifyInstance, id: string): Promise<void> {
  const probe = `probe-${Math.random().toString(36).slice(2)}`
  const response = await postPlant(app, `{"id":${id},"name":"${probe}"}`)
  expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 200, body: { name: probe } })
  const removed = await app.inject({ method: 'DELETE', url: String(response.headers.location), headers: bearer() })
  expect(removed.statusCode).toBe(204)
}
