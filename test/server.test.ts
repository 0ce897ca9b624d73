import { createHash } from 'node:crypto'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from './helpers/app.js'
import { CAPTURED_LOG_LEVEL } from './helpers/log-capture.js'
import { AccessTokenRegistry } from '../src/auth/token-registry.js'
import { openSqliteStore } from '../src/store/sqlite/store.js'
import { spawnServer, startServer } from './helpers/server-process.js'

const TOKEN = 'process-test-token'
const auth = (token = TOKEN) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' })

async function post (baseUrl: string, body: unknown, token = TOKEN) {
  const response = await fetch(`${baseUrl}/plants`, { method: 'POST', headers: auth(token), body: JSON.stringify(body) })
  return { status: response.status, headers: response.headers, body: await response.json() as unknown }
}

/** Starts a server without PLANTSTORE_TOKENS and reads the token it generated and printed. */
async function startWithGeneratedToken (env: Record<string, string>) {
  const server = await startServer(env)
  await expect.poll(() => server.stderr()).toContain('curl')
  return { server, token: /^ {2}(pst_[A-Za-z0-9_-]{43})$/m.exec(server.stderr())?.[1] ?? '' }
}

describe('The built server as a child process, over real HTTP', () => {
  it('serves POST /plants with the exact body and headers', async () => {
    const server = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'p.db')}`, PLANTSTORE_TOKENS: TOKEN })

    const response = await fetch(`${server.baseUrl}/plants`, {
      method: 'POST', headers: auth(), body: '{"id":9223372036854775807,"name":"Fern","tag":"green"}'
    })

    expect(response.status).toBe(200)
    expect(await response.text()).toBe('{"name":"Fern","tag":"green"}')
    expect(response.headers.get('location')).toBe('/plants/9223372036854775807')
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8')
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
  })

  it('keeps every acknowledged plant through SIGKILL the instant after the replies, and replays or conflicts after restart', async () => {
    const file = join(temporaryFolder(), 'durable.db')
    const env = { DATABASE_URL: `sqlite:${file}`, PLANTSTORE_TOKENS: TOKEN }
    const first = await startServer(env)
    const ids = Array.from({ length: 40 }, (_, index) => 1000 + index)

    const answers = await Promise.all(ids.map((id) => post(first.baseUrl, { id, name: `plant-${id}`, tag: 'durable' })))
    process.kill(first.child.pid as number, 'SIGKILL')
    expect(await first.exited).toBe('SIGKILL')
    const second = await startServer(env)
    const replays = await Promise.all(ids.map((id) => post(second.baseUrl, { id, name: `plant-${id}`, tag: 'durable' })))
    const conflict = await post(second.baseUrl, { id: 1000, name: 'someone else' })

    expect(answers.map((answer) => answer.status)).toEqual(ids.map(() => 200))
    expect(replays.map((replay) => replay.body)).toEqual(ids.map((id) => ({ name: `plant-${id}`, tag: 'durable' })))
    expect(replays.map((replay) => replay.status)).toEqual(ids.map(() => 200))
    expect(conflict).toMatchObject({ status: 409, body: { error: 409, message: 'plant 1000 already exists with a different name or tag' } })
  })

  it('makes the initial-admin token on the first start, prints it once with a curl line, and accepts it after a restart', async () => {
    const env = { DATABASE_URL: `sqlite:${join(temporaryFolder(), 'generated.db')}` }
    const { server: first, token } = await startWithGeneratedToken(env)

    const created = await post(first.baseUrl, { id: 1, name: 'Fern' }, token)
    const tokens = await fetch(`${first.baseUrl}/admin/tokens`, { headers: auth(token) })
    process.kill(first.child.pid as number, 'SIGTERM')
    expect(await first.exited).toBe(0)
    const second = await startServer(env)
    const replay = await post(second.baseUrl, { id: 1, name: 'Fern' }, token)
    const wrong = await post(second.baseUrl, { id: 2, name: 'Fern' }, `${token}x`)

    expect(token).toMatch(/^pst_[A-Za-z0-9_-]{43}$/)
    expect(first.stderr()).toContain(`curl -i -H 'Authorization: Bearer ${token}'`)
    expect(first.stderr()).toContain('made the access token "initial-admin" with every scope')
    expect(first.stdout()).not.toContain(token)
    expect(created.status).toBe(200)
    expect(await tokens.json()).toEqual([{
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      name: 'initial-admin',
      scopes: ['plants:read', 'plants:write', 'admin'],
      source: 'store',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    }])
    expect(replay).toMatchObject({ status: 200, body: { name: 'Fern' } })
    expect(wrong.status).toBe(401)
    expect(second.stderr()).not.toContain('initial-admin')
  })

  it('accepts a token given as a sha256: digest next to the stored tokens, and makes no initial-admin when PLANTSTORE_TOKENS is set', async () => {
    const env = { DATABASE_URL: `sqlite:${join(temporaryFolder(), 'both.db')}` }
    const { server: first, token: initialAdmin } = await startWithGeneratedToken(env)
    process.kill(first.child.pid as number, 'SIGTERM')
    expect(await first.exited).toBe(0)
    const digest = createHash('sha256').update('digest-configured-token').digest('hex')
    const fresh = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'configured.db')}`, PLANTSTORE_TOKENS: `sha256:${digest}` })

    const second = await startServer({ ...env, PLANTSTORE_TOKENS: `sha256:${digest}` })
    const byDigest = await post(second.baseUrl, { id: 2, name: 'Ivy' }, 'digest-configured-token')
    const byStoredToken = await post(second.baseUrl, { id: 3, name: 'Moss' }, initialAdmin)
    const freshTokens = await fetch(`${fresh.baseUrl}/admin/tokens`, { headers: auth('digest-configured-token') })

    expect(byDigest).toMatchObject({ status: 200, body: { name: 'Ivy' } })
    expect(byStoredToken).toMatchObject({ status: 200, body: { name: 'Moss' } })
    expect(fresh.stderr()).not.toContain('initial-admin')
    // The entry carries the plant scopes only: listing tokens needs admin.
    expect(freshTokens.status).toBe(403)
  })

  it('reads PLANTSTORE_TOKENS_FILE again on SIGHUP, and keeps the tokens in use when the new file is not valid', async () => {
    const file = join(temporaryFolder(), 'tokens')
    writeFileSync(file, '# the dashboard\nname=dashboard;scopes=plants:read;sighup-first-token-4b1d\n')
    const server = await startServer({ DATABASE_URL: 'memory:', PLANTSTORE_TOKENS_FILE: file })
    const status = async (token: string) => (await fetch(`${server.baseUrl}/plants`, { headers: auth(token) })).status
    expect(await status('sighup-first-token-4b1d')).toBe(200)

    writeFileSync(file, 'name=dashboard-2;scopes=plants:read;sighup-second-token-90ce\n')
    process.kill(server.child.pid as number, 'SIGHUP')
    await expect.poll(() => status('sighup-second-token-90ce'), { timeout: 2000, interval: 20 }).toBe(200)
    const firstAfterReload = await status('sighup-first-token-4b1d')
    writeFileSync(file, 'name=bad name;sighup-third-token-12aa\n')
    process.kill(server.child.pid as number, 'SIGHUP')
    await expect.poll(() => server.stdout(), { timeout: 2000, interval: 20 }).toContain('SIGHUP: the token file was not loaded')

    expect(firstAfterReload).toBe(401)
    expect(await status('sighup-second-token-90ce')).toBe(200)
    expect(await status('sighup-third-token-12aa')).toBe(401)

    // Removing the last entry withdraws the last token: the file may be left with comments only.
    writeFileSync(file, '# nothing here now\n')
    process.kill(server.child.pid as number, 'SIGHUP')
    await expect.poll(() => status('sighup-second-token-90ce'), { timeout: 2000, interval: 20 }).toBe(401)
    await expect.poll(() => server.stdout(), { timeout: 2000, interval: 20 })
      .toContain('"msg":"SIGHUP: the token file holds no token now; only the stored tokens are accepted"')
    expect(server.stdout()).toContain('"msg":"SIGHUP: the token file was not loaded, the tokens in use stay: PLANTSTORE_TOKENS_FILE entry 1 has a bad name')
    expect(server.stdout()).toContain('"tokens":["dashboard-2"],"msg":"SIGHUP: token file read again"')
    expect(server.stdout()).not.toContain('sighup-')
  })

  it('does not start when an entry of PLANTSTORE_TOKENS has the name of a live stored token', async () => {
    const file = join(temporaryFolder(), 'clash.db')
    const store = openSqliteStore(file)
    const registry = new AccessTokenRegistry(store.tokens)
    expect((await registry.create({ name: 'ci', scopes: ['plants:read'] })).status).toBe('created')
    await store.close()

    const server = spawnServer({ DATABASE_URL: `sqlite:${file}`, PLANTSTORE_TOKENS: 'name=ci;clash-process-token-5e2f' })

    expect(await server.exited).toBe(1)
    expect(server.stderr()).toBe('plantstore could not start: PLANTSTORE_TOKENS: the name "ci" is already used by a live token in the store; ' +
      'rename the entry or revoke that token\n')
  })

  it('stops gracefully on SIGTERM and SIGINT with exit code 0 and no error logged', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const file = join(temporaryFolder(), 'stop.db')
      const server = await startServer({ DATABASE_URL: `sqlite:${file}`, PLANTSTORE_TOKENS: TOKEN })
      await post(server.baseUrl, { id: 1, name: 'Fern' })
      expect(existsSync(`${file}-wal`)).toBe(true)

      process.kill(server.child.pid as number, signal)

      expect(await server.exited).toBe(0)
      expect(server.stdout()).not.toMatch(/"level":(50|60)/)
      // SQLite removes the WAL file only when the last connection closes cleanly: the store was closed.
      expect(existsSync(`${file}-wal`)).toBe(false)
    }
  })

  it('writes a quiet service\'s request log line within about a second, and every buffered line at exit', async () => {
    const server = await startServer({ DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: TOKEN })
    const lineOf = (requestId: string) => server.stdout().split('\n').find((line) => line.includes(`"reqId":"${requestId}"`))

    await fetch(`${server.baseUrl}/plants/1`, { headers: { ...auth(), 'x-request-id': 'quiet-1' } })
    const startedWaiting = performance.now()
    await expect.poll(() => lineOf('quiet-1'), { timeout: 4000, interval: 50 }).toBeDefined()
    const waitedMs = performance.now() - startedWaiting
    const burst = ['burst-1', 'burst-2', 'burst-3']
    for (const requestId of burst) await fetch(`${server.baseUrl}/plants/1`, { headers: { ...auth(), 'x-request-id': requestId } })
    process.kill(server.child.pid as number, 'SIGTERM')

    expect(await server.exited).toBe(0)
    // Flushed every second; the margin is for a busy machine.
    expect(waitedMs).toBeLessThan(2500)
    expect(JSON.parse(lineOf('quiet-1') ?? '{}')).toMatchObject({ msg: 'request completed', method: 'GET', url: '/plants/1', statusCode: 404 })
    for (const requestId of burst) expect(lineOf(requestId), requestId).toBeDefined()
  })

  it.each([
    ['PORT', 'not-a-port', 'PORT must be a whole number from 0 to 65535, got "not-a-port"'],
    ['LOG_LEVEL', 'chatty', 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "chatty"'],
    ['PLANTSTORE_TOKENS', 'sha256:123', 'PLANTSTORE_TOKENS entry 1 must be "sha256:" followed by 64 hexadecimal digits']
  ])('refuses to start on a bad %s with one clear line', async (variable, value, message) => {
    const server = spawnServer({ [variable]: value, DATABASE_URL: 'memory:' })

    expect(await server.exited).toBe(1)
    expect(server.stderr()).toBe(`plantstore could not start: configuration error: ${message}\n`)
  })

  it('reports every bad variable of a start, a line each, and exits 1', async () => {
    const server = spawnServer({ PORT: 'not-a-port', LOG_LEVEL: 'chatty', DATABASE_URL: 'mysql://db/plants' })

    expect(await server.exited).toBe(1)
    expect(server.stderr()).toBe([
      'plantstore could not start: configuration error: PORT must be a whole number from 0 to 65535, got "not-a-port"',
      'plantstore could not start: configuration error: DATABASE_URL must be "memory:", "sqlite:<file path>" or "postgres://user:password@host:port/database"',
      'plantstore could not start: configuration error: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "chatty"',
      ''
    ].join('\n'))
  })

  it('refuses to start with one clear line when the SQLite folder cannot be made or written', async () => {
    const notAFolder = join(temporaryFolder(), 'data')
    writeFileSync(notAFolder, '')
    const server = spawnServer({ DATABASE_URL: `sqlite:${notAFolder}/plantstore.db`, PLANTSTORE_TOKENS: TOKEN })

    expect(await server.exited).toBe(1)
    expect(server.stderr()).toMatch(new RegExp(`^plantstore could not start: DATABASE_URL: cannot use the SQLite database ${notAFolder}/plantstore\\.db: ` +
      `the folder ${notAFolder} cannot be created or written by this process \\(uid \\d+; EEXIST\\)\n$`))
  })

  it('reads a .env file in its working directory, where the environment wins, and secrets from _FILE variables', async () => {
    const folder = temporaryFolder()
    writeFileSync(join(folder, 'tokens'), '# the dashboard\ndotenv-file-token\n')
    writeFileSync(join(folder, '.env'), [
      'PLANTSTORE_TOKENS_FILE=tokens',
      'DATABASE_URL_FILE=database-url',
      'PORT=not-a-port-but-overridden',
      'LOG_LEVEL=warn',
      ''
    ].join('\n'))
    writeFileSync(join(folder, 'database-url'), `sqlite:${join(folder, 'dotenv.db')}\n`)
    const server = await startServer({ PORT: '0', LOG_LEVEL: CAPTURED_LOG_LEVEL ?? 'info' }, { cwd: folder })

    const created = await post(server.baseUrl, { id: 7, name: 'Dotenv fern' }, 'dotenv-file-token')
    const refused = await post(server.baseUrl, { id: 8, name: 'Stranger' })

    expect(created).toMatchObject({ status: 200, body: { name: 'Dotenv fern' } })
    expect(refused.status).toBe(401)
    expect(existsSync(join(folder, 'dotenv.db'))).toBe(true)
    // The environment's LOG_LEVEL won over the file's warn: request lines are written (within a second).
    await expect.poll(() => server.stdout(), { timeout: 3000 }).toContain('"msg":"request completed"')
  })
})
