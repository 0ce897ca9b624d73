import type { ChildProcess } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import Database from '../../src/store/sqlite/driver.js'
import { KNOWN_VERSION } from '../../src/store/sqlite/store-rows.js'
import { temporaryFolder } from '../helpers/app.js'
import { runCli, type CliRun } from '../helpers/cli-process.js'
import { startWriteLoad, until } from '../helpers/load.js'
import { startServer } from '../helpers/server-process.js'
import { allPlants, filesIn, makeForeignDatabase, makeStore, makeStoreOfVersion } from './sqlite-stores.js'

/**
 * `plantstore backup FILE [--force]` as operators run it: a process (`node bin/plantstore.js`) with only
 * the environment each test gives it, next to real services on SQLite files.
 */
const OPERATOR_TOKEN = 'backup-test-operator-token-4e1b'
const OPERATOR = `name=operator;scopes=plants:read+plants:write+admin;${OPERATOR_TOKEN}`
const SECONDS = String.raw`in \d+\.\d s`

/** test/fixtures/release-1.0.0.db: schema version 1, two plants and the digest of this generated token. */
const RELEASE_1_TOKEN = 'release-1.0.0-generated-token-7d3e'
const RELEASE_1_PLANTS = '[{"id":-1,"name":"Ficus"},{"id":9007199254740993,"name":"Monstera deliciosa","tag":"tropical"}]'

function backup (folder: string, databaseUrl: string, ...args: string[]): Promise<CliRun> {
  return runCli(['backup', ...args], { cwd: folder, env: { DATABASE_URL: databaseUrl } })
}

function restore (folder: string, databaseUrl: string, ...args: string[]): Promise<CliRun> {
  return runCli(['restore', ...args], { cwd: folder, env: { DATABASE_URL: databaseUrl } })
}

async function call (baseUrl: string, method: string, path: string, token: string, body?: unknown): Promise<Response> {
  return fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
}

describe('A backup taken while a service runs', () => {
  it('holds every write acknowledged before it began, while 32 clients write; restored, a new service serves them to the stored tokens', { timeout: 30_000 }, async () => {
    const folder = temporaryFolder()
    const store = `sqlite:${join(folder, 'plants.db')}`
    const service = await startServer({ DATABASE_URL: store, PLANTSTORE_TOKENS: OPERATOR })
    const made = await call(service.baseUrl, 'POST', '/admin/tokens', OPERATOR_TOKEN, { name: 'reader', scopes: ['plants:read'] })
    const { token: storedToken } = await made.json() as { token: string }
    const load = startWriteLoad(service.baseUrl, OPERATOR_TOKEN, { workers: 32, firstId: 1, maxRequests: 1_000_000 })
    await until(() => load.acknowledged.size >= 500, 15_000, '500 acknowledged writes')

    const acknowledgedBefore = new Map(load.acknowledged)
    const run = await backup(folder, store, 'backup.db')
    const acknowledgedDuring = load.acknowledged.size - acknowledgedBefore.size
    process.kill(service.child.pid as number, 'SIGKILL')
    await service.exited
    await load.stop()

    expect(made.status).toBe(201)
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const line = new RegExp(String.raw`^backed up (\d+) plants, 1 access token, 0 webhook subscriptions and 0 pending webhook events \(schema version ${KNOWN_VERSION}\) to backup\.db ${SECONDS}\n$`).exec(run.stdout)
    expect(line, run.stdout).not.toBeNull()
    expect(acknowledgedDuring, 'the writers kept being answered during the backup').toBeGreaterThan(0)

    const elsewhere = temporaryFolder()
    const restored = `sqlite:${join(elsewhere, 'data', 'plants.db')}`
    expect((await restore(elsewhere, restored, join(folder, 'backup.db'))).code).toBe(0)
    // No PLANTSTORE_TOKENS: only the tokens the backup holds are accepted.
    const restoredService = await startServer({ DATABASE_URL: restored })
    const plants = await allPlants(restoredService.baseUrl, storedToken)
    const missing = [...acknowledgedBefore].filter(([id, name]) => plants.get(String(id))?.name !== name)
    expect(missing).toEqual([])
    expect(plants.size).toBe(Number(line?.[1]))
    expect((await call(restoredService.baseUrl, 'GET', '/plants/1', OPERATOR_TOKEN)).status).toBe(401)
  })

  it('holds the webhook subscriptions and their pending events: the restored service delivers them, signed with the old secret', async () => {
    const { WebhookReceiver } = await import('../helpers/webhook-receiver.js')
    const receiver = await WebhookReceiver.start()
    const folder = temporaryFolder()
    const store = `sqlite:${join(folder, 'plants.db')}`
    const recording = { PLANTSTORE_TOKENS: OPERATOR, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }
    const service = await startServer({ DATABASE_URL: store, ...recording, WEBHOOK_DELIVERY: 'false' })
    const subscribed = await call(service.baseUrl, 'POST', '/admin/webhooks', OPERATOR_TOKEN, { url: receiver.url, events: ['plant.created'] })
    receiver.useSecret((await subscribed.json() as { secret: string }).secret)
    for (const id of [1, 2, 3]) expect((await call(service.baseUrl, 'POST', '/plants', OPERATOR_TOKEN, { id, name: `plant ${id}` })).status).toBe(200)

    const run = await backup(folder, store, 'backup.db')
    process.kill(service.child.pid as number, 'SIGKILL')
    await service.exited
    const restored = `sqlite:${join(folder, 'restored.db')}`
    expect((await restore(folder, restored, 'backup.db')).code).toBe(0)
    await startServer({ DATABASE_URL: restored, ...recording })
    const deliveries = await receiver.waitForDeliveries(3)

    expect(subscribed.status).toBe(201)
    expect(run).toMatchObject({ code: 0, stderr: '' })
    expect(run.stdout).toMatch(new RegExp(String.raw`^backed up 3 plants, 0 access tokens, 1 webhook subscription and 3 pending webhook events \(schema version ${KNOWN_VERSION}\) to backup\.db ${SECONDS}\n$`))
    expect(deliveries.map((delivery) => [delivery.type, delivery.body, delivery.verified]).sort()).toEqual([
      ['plant.created', '{"id":1,"name":"plant 1"}', true],
      ['plant.created', '{"id":2,"name":"plant 2"}', true],
      ['plant.created', '{"id":3,"name":"plant 3"}', true]
    ])
  })
})

describe('The store made by release 1.0.0', () => {
  it('is backed up at its schema version 1, unchanged, and restored into this release: its plants and its generated token work', async () => {
    const folder = temporaryFolder()
    const fixture = new URL('../fixtures/release-1.0.0.db', import.meta.url)
    copyFileSync(fixture, join(folder, 'old.db'))

    const backedUp = await backup(folder, 'sqlite:old.db', 'backup.db')
    const backupFile = new Database(join(folder, 'backup.db'), { readonly: true })
    const backupVersion = backupFile.pragma('user_version', { simple: true })
    backupFile.close()
    const restored = await restore(folder, 'sqlite:data/new.db', 'backup.db')
    const service = await startServer({ DATABASE_URL: `sqlite:${join(folder, 'data', 'new.db')}` })
    const plants = await call(service.baseUrl, 'GET', '/plants', RELEASE_1_TOKEN)

    expect(backedUp).toMatchObject({ code: 0, stderr: '' })
    expect(backedUp.stdout).toMatch(new RegExp(String.raw`^backed up 2 plants, 1 access token, 0 webhook subscriptions and 0 pending webhook events \(schema version 1\) to backup\.db ${SECONDS}\n$`))
    expect(readFileSync(join(folder, 'old.db'))).toEqual(readFileSync(fixture))
    expect(backupVersion).toBe(1)
    expect(restored).toMatchObject({ code: 0, stderr: '' })
    expect(restored.stdout).toMatch(new RegExp(String.raw`^restored 2 plants, 1 access token, 0 webhook subscriptions and 0 pending webhook events \(schema version 1, brought up to ${KNOWN_VERSION}\) from backup\.db into data/new\.db ${SECONDS}\n$`))
    expect(await plants.text()).toBe(RELEASE_1_PLANTS)
  })
})

describe('plantstore backup refuses', () => {
  const refusals: Array<{ name: string, databaseUrl: string, prepare?: (folder: string) => void, stderr: string }> = [
    {
      name: 'a memory store, which lives only inside its service',
      databaseUrl: 'memory:',
      stderr: 'DATABASE_URL is "memory:": a memory store lives only inside its service, with no file to back up; export its plants with GET /admin/export'
    },
    {
      name: 'a PostgreSQL store, naming pg_dump',
      databaseUrl: 'postgres://plantstore@127.0.0.1:1/plantstore',
      stderr: 'DATABASE_URL is a PostgreSQL store: back up PostgreSQL with pg_dump; see docs/guides/backups.md'
    },
    {
      name: 'a store file that does not exist, and does not make one',
      databaseUrl: 'sqlite:data/plants.db',
      stderr: 'cannot back up data/plants.db: it does not exist (DATABASE_URL names it); there is nothing to back up'
    },
    {
      name: 'a file that is not a SQLite database',
      databaseUrl: 'sqlite:notes.txt',
      prepare: (folder) => writeFileSync(join(folder, 'notes.txt'), 'plants to buy: a ficus\n'),
      stderr: 'cannot back up notes.txt: it is not a SQLite database, so not a plantstore store'
    },
    {
      name: 'a SQLite database that is not a plantstore store',
      databaseUrl: 'sqlite:other.db',
      prepare: (folder) => makeForeignDatabase(join(folder, 'other.db')),
      stderr: 'cannot back up other.db: it is a SQLite database but not a plantstore store (it has no plants table)'
    },
    {
      name: 'a store of a schema newer than this release knows, in the words a start uses',
      databaseUrl: 'sqlite:newer.db',
      prepare: (folder) => makeStoreOfVersion(join(folder, 'newer.db'), 99),
      stderr: `cannot back up newer.db: the database schema is at version 99, newer than this plantstore knows (${KNOWN_VERSION}); ` +
        'run a plantstore release at least as new as the one that last opened it'
    },
    {
      name: 'a FILE that exists, which it leaves untouched',
      databaseUrl: 'sqlite:plants.db',
      prepare: (folder) => {
        makeStore(join(folder, 'plants.db'), 3)
        writeFileSync(join(folder, 'backup.db'), 'last week\'s backup')
      },
      stderr: 'backup.db exists; backup will not replace it without --force'
    }
  ]

  for (const refusal of refusals) {
    it(`${refusal.name}: one line, exit 1, no file written or changed`, async () => {
      const folder = temporaryFolder()
      refusal.prepare?.(folder)
      const before = new Map(filesIn(folder).map((name) => [name, readFileSync(join(folder, name))]))

      const run = await backup(folder, refusal.databaseUrl, 'backup.db')

      expect(run).toEqual({ code: 1, signal: null, stdout: '', stderr: `plantstore: ${refusal.stderr}\n` })
      expect(new Map(filesIn(folder).map((name) => [name, readFileSync(join(folder, name))]))).toEqual(before)
    })
  }

  it('a FILE in a folder that does not exist', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'plants.db'), 3)

    const run = await backup(folder, 'sqlite:plants.db', 'backups/backup.db')

    expect(run).toMatchObject({ code: 1, stdout: '', stderr: 'plantstore: cannot write the backup to backups/backup.db: the folder backups does not exist\n' })
    expect(filesIn(folder)).toEqual(['plants.db'])
  })
})

describe('plantstore backup --force', () => {
  it('replaces a FILE that exists with the backup', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'plants.db'), 3)
    mkdirSync(join(folder, 'backups'))
    writeFileSync(join(folder, 'backups', 'backup.db'), 'last week\'s backup')

    const run = await backup(folder, 'sqlite:plants.db', 'backups/backup.db', '--force')
    const copy = new Database(join(folder, 'backups', 'backup.db'), { readonly: true })
    const names = copy.prepare('SELECT name FROM plants ORDER BY id').pluck().all()
    copy.close()

    expect(run).toMatchObject({ code: 0, stderr: '' })
    expect(run.stdout).toMatch(new RegExp(String.raw`^backed up 3 plants, 0 access tokens, 0 webhook subscriptions and 0 pending webhook events \(schema version ${KNOWN_VERSION}\) to backups/backup\.db ${SECONDS}\n$`))
    expect(names).toEqual(['plant 1', 'plant 2', 'plant 3'])
    expect(filesIn(join(folder, 'backups'))).toEqual(['backup.db'])
  })
})

/** Sends SIGINT to the backup as soon as its copy is under way, under its temporary name; whether it did. */
async function interruptOnceCopying (child: ChildProcess, folder: string): Promise<boolean> {
  while (child.exitCode === null && !filesIn(folder).some((name) => name.startsWith('.backup.db.partial-'))) await nextTurn()
  return child.exitCode === null && process.kill(child.pid as number, 'SIGINT')
}

describe('Ctrl-C during a backup', () => {
  it('leaves no file under the final name and no temporary file', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'plants.db'), 400_000)
    const storeFiles = filesIn(folder)

    let interrupting: Promise<boolean> | undefined
    const run = await runCli(['backup', 'backup.db'], {
      cwd: folder,
      env: { DATABASE_URL: 'sqlite:plants.db' },
      started: (child) => { interrupting = interruptOnceCopying(child, folder) }
    })

    expect(await interrupting).toBe(true)
    expect(run).toEqual({ code: 130, signal: null, stdout: '', stderr: 'plantstore: interrupted by SIGINT; nothing was left half-written\n' })
    expect(filesIn(folder).filter((name) => !name.startsWith('plants.db'))).toEqual([])
    expect(storeFiles).toEqual(['plants.db'])
  })
})
