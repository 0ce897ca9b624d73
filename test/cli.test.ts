import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { MAIN_USAGE } from '../src/cli/commands.js'
import { CREATE_USAGE, LIST_USAGE, REVOKE_USAGE, TOKENS_USAGE } from '../src/cli/tokens.js'
import { temporaryFolder } from './helpers/app.js'
import { appendCapturedLog } from './helpers/log-capture.js'
import { createTestDatabase } from './helpers/postgres-database.js'
import { startServer } from './helpers/server-process.js'

/**
 * `plantstore tokens create|list|revoke` as operators run it: `node bin/plantstore.js …` as a child
 * process (dist/ is built by the global set-up), with only the environment each test gives it, in a
 * temporary working directory (so no `.env` but a test's own is read).
 */
const CLI = fileURLToPath(new URL('../bin/plantstore.js', import.meta.url))
const ADMIN_TOKEN = 'cli-test-admin-token-3f9c1e7a'
const ENVIRONMENT_TOKEN = 'cli-test-environment-token-8a2d47c0'
const GENERATED_TOKEN = /^pst_[A-Za-z0-9_-]{43}$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const SHORT_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/

interface Run { readonly code: number | null, readonly stdout: string, readonly stderr: string }

/** Every stderr of this file, and every token its tests made: none may ever be on stderr. */
const everyStderr: string[] = []
const everyToken: string[] = [ADMIN_TOKEN, ENVIRONMENT_TOKEN]

function cli (args: readonly string[], env: Record<string, string>, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe']
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
    child.once('error', reject)
    child.once('close', (code) => {
      everyStderr.push(stderr)
      appendCapturedLog(stderr)
      try {
        expectNoSecretIn(stderr, [ADMIN_TOKEN, ENVIRONMENT_TOKEN])
        resolve({ code, stdout, stderr })
      } catch (error) {
        reject(error)
      }
    })
  })
}

/** A command that must succeed: its stdout, after checking the exit code and an empty stderr. */
async function cliOk (args: readonly string[], env: Record<string, string>, cwd: string): Promise<string> {
  const run = await cli(args, env, cwd)
  expect({ code: run.code, stderr: run.stderr }, `plantstore ${args.join(' ')}`).toEqual({ code: 0, stderr: '' })
  return run.stdout
}

interface CreatedBody { id: string, name: string, scopes: string[], createdAt: string, expiresAt?: string, token: string }
interface ViewBody { id: string, name: string, scopes: string[], source: string, createdAt: string, expiresAt?: string, revokedAt?: string }

async function createJson (args: readonly string[], env: Record<string, string>, cwd: string): Promise<CreatedBody> {
  const body = JSON.parse(await cliOk(['tokens', 'create', ...args, '--json'], env, cwd)) as CreatedBody
  everyToken.push(body.token)
  return body
}

async function listJson (env: Record<string, string>, cwd: string): Promise<{ text: string, tokens: ViewBody[] }> {
  const text = await cliOk(['tokens', 'list', '--json'], env, cwd)
  return { text, tokens: JSON.parse(text) as ViewBody[] }
}

/** The table of `tokens list`, read by the header's column offsets: misaligned cells would come apart. */
function tableRows (text: string): Array<Record<string, string>> {
  const [header = '', ...rows] = text.trimEnd().split('\n')
  const columns = [...header.matchAll(/\S+/g)].map((match) => ({ name: match[0], start: match.index }))
  return rows.map((row) => Object.fromEntries(columns.map((column, index) =>
    [column.name, row.slice(column.start, columns[index + 1]?.start ?? row.length).trimEnd()])))
}

const sha256 = (text: string) => createHash('sha256').update(text).digest()

/** Neither a token nor its digest (hex or base64) is anywhere in `text`. */
function expectNoSecretIn (text: string, tokens: readonly string[]): void {
  expect(text).not.toMatch(/pst_/)
  for (const token of tokens) {
    expect(text).not.toContain(token)
    expect(text.toLowerCase()).not.toContain(sha256(token).toString('hex'))
    expect(text).not.toContain(sha256(token).toString('base64'))
  }
}

describe('plantstore: help and usage errors, before any configuration is read', () => {
  it.each([
    [['--help'], MAIN_USAGE],
    [['-h'], MAIN_USAGE],
    [['tokens', '--help'], TOKENS_USAGE],
    [['tokens', 'create', '--help'], CREATE_USAGE],
    [['tokens', 'create', '--name', 'bad name', '-h'], CREATE_USAGE],
    [['tokens', 'list', '-h'], LIST_USAGE],
    [['tokens', 'revoke', '--help'], REVOKE_USAGE]
  ])('When run as plantstore %j, Then it prints that usage on stdout and exits 0', async (args, usage) => {
    const run = await cli(args, { DATABASE_URL: 'mysql://not-read' }, temporaryFolder())

    expect(run).toEqual({ code: 0, stdout: usage, stderr: '' })
  })

  it('documents the commands, options and exit codes', () => {
    expect(MAIN_USAGE).toMatch(/^Usage: plantstore <command> \[options\]\n/)
    for (const usage of [MAIN_USAGE, TOKENS_USAGE, CREATE_USAGE, LIST_USAGE, REVOKE_USAGE]) {
      expect(usage).toContain('Exit codes:\n  0  success\n  1  the operation failed')
      expect(usage).toContain('\n  2  usage error: unknown command or option, missing or bad value\n')
    }
    expect(CREATE_USAGE).toContain('--expires-in DURATION')
    expect(CREATE_USAGE).toContain('plants:read   GET /plants')
    expect(REVOKE_USAGE).toContain('send SIGHUP')
  })

  const see = (command: string) => ` (see "${command} --help")\n`
  it.each([
    [[], 'no command given; the commands are tokens create, tokens list, tokens revoke, backup, restore, export, import, copy, webhooks reseal' + see('plantstore')],
    [['plants'], 'unknown command "plants"; the commands are tokens create, tokens list, tokens revoke, backup, restore, export, import, copy, webhooks reseal' + see('plantstore')],
    [['--verbose'], 'unknown option "--verbose"' + see('plantstore')],
    [['tokens'], 'tokens needs a command: create, list or revoke' + see('plantstore tokens')],
    [['tokens', 'rotate'], 'unknown command "tokens rotate"; the tokens commands are create, list and revoke' + see('plantstore tokens')],
    [['tokens', 'list', '--all'], 'unknown option "--all" for "tokens list"' + see('plantstore tokens list')],
    [['tokens', 'list', 'extra'], 'unexpected argument "extra" for "tokens list"' + see('plantstore tokens list')],
    [['tokens', 'list', '--json=yes'], '--json takes no value' + see('plantstore tokens list')],
    [['tokens', 'create', '--scopes', 'admin'], 'tokens create needs --name' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'ci'], 'tokens create needs --scopes' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', '--scopes', 'admin'],
      '--name needs a value; write --name=VALUE for one that starts with "-"' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'ci', '--name', 'cd', '--scopes', 'admin'], '--name is given more than once' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'has space', '--scopes', 'admin'],
      '--name must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-", got "has space"' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'n'.repeat(65), '--scopes', 'admin'],
      `--name must be 1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-", got "${'n'.repeat(65)}"` + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'ci', '--scopes', 'plants:read,plants:delete'],
      '--scopes has the unknown scope "plants:delete"; scopes are plants:read, plants:write, admin, separated by commas' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'ci', '--scopes', 'admin,plants:read,admin'],
      '--scopes names "admin" more than once' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'ci', '--scopes', ''],
      '--scopes needs at least one scope; scopes are plants:read, plants:write, admin, separated by commas' + see('plantstore tokens create')],
    [['tokens', 'create', '--name', 'ci', '--scopes', 'admin,'],
      '--scopes has an empty entry in "admin,"; scopes are plants:read, plants:write, admin, separated by commas' + see('plantstore tokens create')],
    ...['30', '0d', '1.5h', '-1d', '2y', '10 m'].map((duration) => [
      ['tokens', 'create', '--name', 'ci', '--scopes', 'admin', `--expires-in=${duration}`],
      `--expires-in must be a positive whole number followed by s, m, h, d or w (like 90m or 30d), got "${duration}"` + see('plantstore tokens create')
    ] as [string[], string]),
    [['tokens', 'create', '--name', 'ci', '--scopes', 'admin', '--expires-in', '600000w'],
      '--expires-in 600000w would end after the year 9999' + see('plantstore tokens create')],
    [['tokens', 'revoke'], 'tokens revoke needs the id or the name of a token' + see('plantstore tokens revoke')],
    [['tokens', 'revoke', 'ci', 'cd'], 'tokens revoke takes one id or name, got 2' + see('plantstore tokens revoke')]
  ])('When run as plantstore %j, Then it exits 2 with one line naming the problem, and nothing on stdout', async (args, message) => {
    // A configuration that would fail (exit 1) shows the arguments are checked first.
    const run = await cli(args, { DATABASE_URL: 'mysql://not-read' }, temporaryFolder())

    expect(run).toEqual({ code: 2, stdout: '', stderr: `plantstore: ${message}` })
  })
})

describe('plantstore: the configuration, read as the service reads it', () => {
  const memoryRefused = 'plantstore: DATABASE_URL is "memory:": the tokens of a memory store live only inside the running service; ' +
    'manage them there with POST /admin/tokens, GET /admin/tokens and DELETE /admin/tokens/{id}\n'

  it('When DATABASE_URL is memory:, Then it refuses with exit 1, even with --json', async () => {
    const folder = temporaryFolder()
    const list = await cli(['tokens', 'list'], { DATABASE_URL: 'memory:' }, folder)
    const create = await cli(['tokens', 'create', '--name', 'ci', '--scopes', 'admin', '--json'], { DATABASE_URL: 'memory:' }, folder)

    expect(list).toEqual({ code: 1, stdout: '', stderr: memoryRefused })
    expect(create).toEqual({ code: 1, stdout: '', stderr: memoryRefused })
  })

  it('When .env in the working directory says memory:, Then that is what it reads', async () => {
    const folder = temporaryFolder()
    writeFileSync(join(folder, '.env'), 'DATABASE_URL=memory:\n')

    expect(await cli(['tokens', 'list'], {}, folder)).toEqual({ code: 1, stdout: '', stderr: memoryRefused })
  })

  it('When a variable is invalid, Then it exits 1 naming each bad variable on one line, never echoing a token', async () => {
    const run = await cli(['tokens', 'list', '--json'], {
      DATABASE_URL: 'mysql://x', PLANTSTORE_TOKENS: `name=ops;${ENVIRONMENT_TOKEN} with a space`
    }, temporaryFolder())

    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: 'plantstore: configuration error: DATABASE_URL must be "memory:", "sqlite:<file path>" or ' +
        '"postgres://user:password@host:port/database"; PLANTSTORE_TOKENS entry 1 is not a valid bearer token ' +
        '(allowed: letters, digits, - . _ ~ + / and trailing =)\n'
    })
  })

  it('When the database cannot be reached or opened, Then it exits 1 with one line saying so', async () => {
    const folder = temporaryFolder()
    writeFileSync(join(folder, 'not-a-folder'), '')
    const postgres = await cli(['tokens', 'list'], { DATABASE_URL: 'postgres://plantstore@127.0.0.1:1/plantstore' }, folder)
    const sqlite = await cli(['tokens', 'list'], { DATABASE_URL: `sqlite:${join(folder, 'not-a-folder', 'p.db')}` }, folder)

    expect(postgres).toEqual({
      code: 1, stdout: '', stderr: 'plantstore: the database is unavailable: PostgreSQL is unavailable (connect ECONNREFUSED 127.0.0.1:1)\n'
    })
    expect(sqlite).toMatchObject({ code: 1, stdout: '' })
    expect(sqlite.stderr).toMatch(new RegExp(`^plantstore: DATABASE_URL: cannot use the SQLite database ${join(folder, 'not-a-folder', 'p.db')}: .*\\n$`))
  })
})

const backends = [
  { name: 'SQLite', databaseUrl: async () => `sqlite:${join(temporaryFolder(), 'plants.db')}` },
  { name: 'PostgreSQL', databaseUrl: () => createTestDatabase() }
]

describe.each(backends)('plantstore tokens on $name', ({ databaseUrl }) => {
  it('creates, lists and revokes tokens next to a PLANTSTORE_TOKENS entry, with names unique across both', async () => {
    const folder = temporaryFolder()
    const env = { DATABASE_URL: await databaseUrl(), PLANTSTORE_TOKENS: `name=ops;scopes=admin;${ENVIRONMENT_TOKEN}` }

    // Create: JSON and text.
    const ci = await createJson(['--name', 'ci', '--scopes', 'admin,plants:read'], env, folder)
    const deployText = await cliOk(['tokens', 'create', '--name', 'deploy', '--scopes', 'plants:write,plants:read', '--expires-in', '90m'], env, folder)
    const deployToken = deployText.split('\n')[0] ?? ''
    everyToken.push(deployToken)
    const deployId = /^ {2}id {7}(\S+)$/m.exec(deployText)?.[1] ?? ''
    const deployExpires = /^ {2}expires {2}(\S+)$/m.exec(deployText)?.[1] ?? ''

    expect(Object.keys(ci)).toEqual(['id', 'name', 'scopes', 'createdAt', 'token'])
    expect(ci).toEqual({ id: expect.stringMatching(UUID), name: 'ci', scopes: ['plants:read', 'admin'], createdAt: expect.stringMatching(TIME), token: expect.stringMatching(GENERATED_TOKEN) })
    expect(ci.token).toHaveLength(47)
    expect(deployToken).toMatch(GENERATED_TOKEN)
    expect(deployId).toMatch(UUID)
    expect(deployExpires).toMatch(SHORT_TIME)
    expect(deployText).toBe([
      deployToken,
      '',
      'The access token above is shown only now: only its SHA-256 digest is stored. Keep it safe.',
      `  id       ${deployId}`,
      '  name     deploy',
      '  scopes   plants:read,plants:write',
      `  expires  ${deployExpires}`,
      ''
    ].join('\n'))

    // List: newest first, the environment entry included, no token and no digest.
    const listed = await listJson(env, folder)
    const table = await cliOk(['tokens', 'list'], env, folder)
    const deploy = listed.tokens.find((token) => token.id === deployId)

    expect(listed.tokens).toEqual([
      { id: 'env:ops', name: 'ops', scopes: ['admin'], source: 'environment', createdAt: expect.stringMatching(TIME) },
      { id: deployId, name: 'deploy', scopes: ['plants:read', 'plants:write'], source: 'store', createdAt: expect.stringMatching(TIME), expiresAt: expect.stringMatching(TIME) },
      { id: ci.id, name: 'ci', scopes: ['plants:read', 'admin'], source: 'store', createdAt: ci.createdAt }
    ])
    expect(Object.keys(listed.tokens[1] ?? {})).toEqual(['id', 'name', 'scopes', 'createdAt', 'expiresAt', 'source'])
    expect(Date.parse(deploy?.expiresAt ?? '') - Date.parse(deploy?.createdAt ?? '')).toBeGreaterThanOrEqual(90 * 60_000 - 1000)
    expect(Date.parse(deploy?.expiresAt ?? '') - Date.parse(deploy?.createdAt ?? '')).toBeLessThanOrEqual(90 * 60_000 + 1000)
    expect(deploy?.expiresAt?.replace(/\.\d{3}Z$/, 'Z')).toBe(deployExpires)
    expect(tableRows(table)).toEqual([
      { ID: 'env:ops', NAME: 'ops', SCOPES: 'admin', SOURCE: 'environment', CREATED: expect.stringMatching(SHORT_TIME), EXPIRES: '-', STATUS: 'live' },
      { ID: deployId, NAME: 'deploy', SCOPES: 'plants:read,plants:write', SOURCE: 'store', CREATED: expect.stringMatching(SHORT_TIME), EXPIRES: deployExpires, STATUS: 'live' },
      { ID: ci.id, NAME: 'ci', SCOPES: 'plants:read,admin', SOURCE: 'store', CREATED: ci.createdAt.replace(/\.\d{3}Z$/, 'Z'), EXPIRES: '-', STATUS: 'live' }
    ])
    expectNoSecretIn(listed.text + table, [ci.token, deployToken, ENVIRONMENT_TOKEN])

    // A live name is taken, in the store or in the environment; nothing is made, nothing printed.
    const taken = await cli(['tokens', 'create', '--name', 'ci', '--scopes', 'plants:read', '--json'], env, folder)
    const takenByEnvironment = await cli(['tokens', 'create', '--name', 'ops', '--scopes', 'plants:read'], env, folder)

    expect(taken).toEqual({ code: 1, stdout: '', stderr: 'plantstore: a live access token is already named "ci"; revoke it or choose another name\n' })
    expect(takenByEnvironment).toEqual({ code: 1, stdout: '', stderr: 'plantstore: a live access token is already named "ops"; revoke it or choose another name\n' })

    // Revoke by name (text), then by id (JSON); again; unknown; the environment's.
    const byName = await cliOk(['tokens', 'revoke', 'ci'], env, folder)
    const byId = JSON.parse(await cliOk(['tokens', 'revoke', deployId, '--json'], env, folder)) as ViewBody
    const nameAgain = await cli(['tokens', 'revoke', 'ci'], env, folder)
    const idAgain = await cliOk(['tokens', 'revoke', ci.id], env, folder)
    const unknown = await cli(['tokens', 'revoke', 'no-such-name', '--json'], env, folder)
    const environmentByName = await cli(['tokens', 'revoke', 'ops'], env, folder)
    const environmentById = await cli(['tokens', 'revoke', 'env:ops', '--json'], env, folder)
    const after = await listJson(env, folder)
    const revokedCi = after.tokens.find((token) => token.id === ci.id)

    expect(byName).toMatch(new RegExp(`^revoked the access token "ci" \\(id ${ci.id}\\) at \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ\\n$`))
    expect(byId).toEqual({
      ...deploy,
      revokedAt: expect.stringMatching(TIME)
    })
    expect(Object.keys(byId)).toEqual(['id', 'name', 'scopes', 'createdAt', 'expiresAt', 'source', 'revokedAt'])
    expect(nameAgain).toEqual({ code: 1, stdout: '', stderr: 'plantstore: no access token has the id or the live name "ci"\n' })
    expect(idAgain).toBe(`the access token "ci" (id ${ci.id}) was already revoked at ${revokedCi?.revokedAt?.replace(/\.\d{3}Z$/, 'Z')}\n`)
    expect(unknown).toEqual({ code: 1, stdout: '', stderr: 'plantstore: no access token has the id or the live name "no-such-name"\n' })
    const notRevocable = 'plantstore: the access token "ops" comes from the environment and cannot be revoked here: remove it from ' +
      'the token file and send SIGHUP to the service, or from PLANTSTORE_TOKENS and restart the service\n'
    expect(environmentByName).toEqual({ code: 1, stdout: '', stderr: notRevocable })
    expect(environmentById).toEqual({ code: 1, stdout: '', stderr: notRevocable })
    expect(after.tokens.map((token) => [token.name, token.revokedAt === undefined ? 'live' : 'revoked'])).toEqual([
      ['ops', 'live'], ['deploy', 'revoked'], ['ci', 'revoked']
    ])
    expect(revokedCi?.revokedAt).toMatch(TIME)

    // A revoked token's name is free again.
    const again = await createJson(['--name', 'ci', '--scopes', 'plants:read'], env, folder)
    expect(again).toMatchObject({ name: 'ci', scopes: ['plants:read'] })
    expect(again.id).not.toBe(ci.id)
  })

  it('frees the name of an expired token, which the list then shows as expired', async () => {
    const folder = temporaryFolder()
    const env = { DATABASE_URL: await databaseUrl() }
    const short = await createJson(['--name', 'short-lived', '--scopes', 'plants:read', '--expires-in', '1s'], env, folder)
    const whileLive = await cli(['tokens', 'create', '--name', 'short-lived', '--scopes', 'plants:read'], env, folder)
    await sleep(Math.max(0, Date.parse(short.expiresAt ?? '') - Date.now() + 50))
    const afterExpiry = await createJson(['--name', 'short-lived', '--scopes', 'admin'], env, folder)
    const table = tableRows(await cliOk(['tokens', 'list'], env, folder))

    expect(Date.parse(short.expiresAt ?? '') - Date.parse(short.createdAt)).toBeGreaterThanOrEqual(900)
    expect(whileLive).toEqual({ code: 1, stdout: '', stderr: 'plantstore: a live access token is already named "short-lived"; revoke it or choose another name\n' })
    expect(afterExpiry).toMatchObject({ name: 'short-lived', scopes: ['admin'] })
    expect(table.map((row) => [row.ID, row.STATUS])).toEqual([[afterExpiry.id, 'live'], [short.id, 'expired']])
  })

  it('makes a token expire --expires-in after its creation, in seconds, minutes, hours, days and weeks', async () => {
    const folder = temporaryFolder()
    const env = { DATABASE_URL: await databaseUrl() }
    const durations = ['45s', '90m', '36h', '30d', '2w']

    const secondsLived: Record<string, number> = {}
    for (const duration of durations) {
      const created = await createJson(['--name', `lives-${duration}`, '--scopes', 'plants:read', '--expires-in', duration], env, folder)
      secondsLived[duration] = Math.round((Date.parse(created.expiresAt ?? '') - Date.parse(created.createdAt)) / 1000)
    }

    expect(secondsLived).toEqual({ '45s': 45, '90m': 90 * 60, '36h': 36 * 3600, '30d': 30 * 86_400, '2w': 14 * 86_400 })
  })
})

describe.each(backends)('plantstore tokens against a running service on $name', ({ name, databaseUrl }) => {
  /** Polls GET /plants with `token` every 50 ms until it answers `status`; resolves with the time that took. */
  async function untilAnswered (baseUrl: string, token: string, status: number, since: number): Promise<number> {
    for (;;) {
      const response = await fetch(`${baseUrl}/plants`, { headers: { authorization: `Bearer ${token}` } })
      await response.arrayBuffer()
      if (response.status === status) return performance.now() - since
      if (performance.now() - since > 5000) throw new Error(`GET /plants still answers ${response.status}, not ${status}, after 5 s`)
      await sleep(50)
    }
  }

  it('has a token it makes accepted by the service within 2 s, and refused (401) within 2 s after it revokes it', async () => {
    const folder = temporaryFolder()
    const env = { DATABASE_URL: await databaseUrl(), PLANTSTORE_TOKENS: `name=ops;scopes=admin;${ADMIN_TOKEN}` }
    const server = await startServer(env)

    const created = await createJson(['--name', 'dashboard', '--scopes', 'plants:read'], env, folder)
    const acceptedAfterMs = await untilAnswered(server.baseUrl, created.token, 200, performance.now())
    const seenByAdmin = await fetch(`${server.baseUrl}/admin/tokens`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    const revoked = await cliOk(['tokens', 'revoke', 'dashboard', '--json'], env, folder)
    const refusedAfterMs = await untilAnswered(server.baseUrl, created.token, 401, performance.now())
    console.log(`${name}: a token made by the CLI was accepted by the service ${acceptedAfterMs.toFixed(0)} ms after the CLI exited; ` +
      `revoked by the CLI, it was refused ${refusedAfterMs.toFixed(0)} ms after`)

    expect(acceptedAfterMs).toBeLessThan(2000)
    expect(refusedAfterMs).toBeLessThan(2000)
    expect(seenByAdmin.status).toBe(200)
    expect(await seenByAdmin.json()).toContainEqual({ id: created.id, name: 'dashboard', scopes: ['plants:read'], source: 'store', createdAt: created.createdAt })
    expect(JSON.parse(revoked)).toMatchObject({ id: created.id, name: 'dashboard', revokedAt: expect.stringMatching(TIME) })
    expectNoSecretIn(server.stdout() + server.stderr(), [created.token, ADMIN_TOKEN])
  })
})

// Each run's stderr is checked at once for generated and configured tokens; this checks them all for
// every token the file's tests made, and their digests.
afterAll(() => {
  expectNoSecretIn(everyStderr.join('\n'), everyToken)
})
