import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { KNOWN_VERSION } from '../../src/store/sqlite/store-rows.js'
import { temporaryFolder } from '../helpers/app.js'
import { runCli, type CliRun } from '../helpers/cli-process.js'
import { startServer } from '../helpers/server-process.js'
import { allPlants, filesIn, makeForeignDatabase, makeStore, makeStoreOfVersion } from './sqlite-stores.js'

/**
 * `plantstore restore FILE [--force]` as operators run it: a process (`node bin/plantstore.js`) with only
 * the environment each test gives it, on SQLite files and next to real services.
 */
const TOKEN = 'restore-test-token-93c0'
const PAGE_SIZE = 4096

function restore (folder: string, databaseUrl: string, ...args: string[]): Promise<CliRun> {
  return runCli(['restore', ...args], { cwd: folder, env: { DATABASE_URL: databaseUrl } })
}

async function post (baseUrl: string, id: number): Promise<number> {
  const response = await fetch(`${baseUrl}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, name: `plant ${id}` })
  })
  return response.status
}

/** Every file of `folder` with its bytes. */
function contentsOf (folder: string): Map<string, Buffer> {
  return new Map(filesIn(folder).map((name) => [name, readFileSync(join(folder, name))]))
}

describe('plantstore restore --force', () => {
  it('replaces a store whose service was killed with the backup, never applying the old store\'s write-ahead log to it', { timeout: 60_000 }, async () => {
    const folder = temporaryFolder()
    const store = `sqlite:${join(folder, 'plants.db')}`
    const service = await startServer({ DATABASE_URL: store, PLANTSTORE_TOKENS: TOKEN })
    for (const id of [1, 2, 3]) expect(await post(service.baseUrl, id)).toBe(200)
    const backedUp = await runCli(['backup', 'backup.db'], { cwd: folder, env: { DATABASE_URL: store } })
    for (const id of [4, 5, 6]) expect(await post(service.baseUrl, id)).toBe(200)
    process.kill(service.child.pid as number, 'SIGKILL')
    await service.exited
    const leftBehind = filesIn(folder)

    const run = await restore(folder, store, 'backup.db', '--force')
    const restoredService = await startServer({ DATABASE_URL: store, PLANTSTORE_TOKENS: TOKEN })

    expect(backedUp.code).toBe(0)
    expect(leftBehind).toEqual(['backup.db', 'plants.db', 'plants.db-shm', 'plants.db-wal'])
    expect(run).toMatchObject({ code: 0, stderr: '' })
    expect(run.stdout).toMatch(new RegExp(String.raw`^restored 3 plants, 0 access tokens, 0 webhook subscriptions and 0 pending webhook events \(schema version ${KNOWN_VERSION}\) ` +
      String.raw`from backup\.db into ${folder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/plants\.db in \d+\.\d s\n$`))
    expect([...(await allPlants(restoredService.baseUrl, TOKEN)).values()]).toEqual([1, 2, 3].map((id) => ({ id, name: `plant ${id}` })))
  })

  it('refuses a store a running service has open, which keeps serving it', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'backup.db'), 5)
    const store = `sqlite:${join(folder, 'plants.db')}`
    const service = await startServer({ DATABASE_URL: store, PLANTSTORE_TOKENS: TOKEN })
    expect(await post(service.baseUrl, 42)).toBe(200)

    const run = await restore(folder, store, 'backup.db', '--force')

    expect(run).toEqual({
      code: 1,
      signal: null,
      stdout: '',
      stderr: `plantstore: cannot restore into ${folder}/plants.db: another process has it open (a running service?); stop it first\n`
    })
    expect(filesIn(folder)).toEqual(['backup.db', 'plants.db', 'plants.db-shm', 'plants.db-wal'])
    expect(await post(service.baseUrl, 43)).toBe(200)
    expect([...(await allPlants(service.baseUrl, TOKEN)).keys()]).toEqual(['42', '43'])
  })
})

describe('plantstore restore refuses, leaving the store as it was', () => {
  /** A backup of 3,000 plants (several pages), made as `backup` makes it: one file. */
  const makeBackup = (path: string): void => makeStore(path, 3000)
  const refusals: Array<{ name: string, prepare: (folder: string) => void, stderr: string | ((folder: string) => string) }> = [
    {
      name: 'a FILE that does not exist',
      prepare: () => {},
      stderr: 'cannot restore backup.db: it does not exist'
    },
    {
      name: 'an empty FILE',
      prepare: (folder) => writeFileSync(join(folder, 'backup.db'), ''),
      stderr: 'cannot restore backup.db: it is empty, not a plantstore backup'
    },
    {
      name: 'a FILE that is not a SQLite database',
      prepare: (folder) => writeFileSync(join(folder, 'backup.db'), '{"id":1,"name":"an export, not a backup"}\n'),
      stderr: 'cannot restore backup.db: it is not a SQLite database, so not a plantstore backup'
    },
    {
      name: 'a truncated FILE',
      prepare: (folder) => {
        makeBackup(join(folder, 'whole.db'))
        const whole = readFileSync(join(folder, 'whole.db'))
        writeFileSync(join(folder, 'backup.db'), whole.subarray(0, 10 * PAGE_SIZE))
      },
      stderr: (folder) => `cannot restore backup.db: it is truncated: its header says ${readFileSync(join(folder, 'whole.db')).length} bytes, it has ${10 * PAGE_SIZE}`
    },
    {
      name: 'a damaged FILE, whose plants table cannot be read',
      prepare: (folder) => {
        makeBackup(join(folder, 'backup.db'))
        const bytes = readFileSync(join(folder, 'backup.db'))
        // Page 2 is the root of the plants table, the first table the schema made.
        bytes.fill('A', PAGE_SIZE, 2 * PAGE_SIZE)
        writeFileSync(join(folder, 'backup.db'), bytes)
      },
      stderr: 'cannot restore backup.db: it is damaged (database disk image is malformed)'
    },
    {
      name: 'a SQLite database that is not a plantstore store',
      prepare: (folder) => makeForeignDatabase(join(folder, 'backup.db')),
      stderr: 'cannot restore backup.db: it is a SQLite database but not a plantstore store (it has no plants table)'
    },
    {
      name: 'a backup of a schema newer than this release knows, in the words a start uses',
      prepare: (folder) => makeStoreOfVersion(join(folder, 'backup.db'), KNOWN_VERSION + 1),
      stderr: `cannot restore backup.db: the database schema is at version ${KNOWN_VERSION + 1}, newer than this plantstore knows (${KNOWN_VERSION}); ` +
        'run a plantstore release at least as new as the one that last opened it'
    }
  ]

  for (const refusal of refusals) {
    it(`${refusal.name}: one line, exit 1, the store and every other file untouched`, async () => {
      const folder = temporaryFolder()
      makeStore(join(folder, 'plants.db'), 2)
      refusal.prepare(folder)
      const before = contentsOf(folder)

      const run = await restore(folder, 'sqlite:plants.db', 'backup.db', '--force')

      const stderr = typeof refusal.stderr === 'string' ? refusal.stderr : refusal.stderr(folder)
      expect(run).toEqual({ code: 1, signal: null, stdout: '', stderr: `plantstore: ${stderr}\n` })
      expect(contentsOf(folder)).toEqual(before)
    })
  }

  it('a store that exists, without --force', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'plants.db'), 2)
    makeStore(join(folder, 'backup.db'), 5)
    const before = contentsOf(folder)

    const run = await restore(folder, 'sqlite:plants.db', 'backup.db')

    expect(run).toEqual({ code: 1, signal: null, stdout: '', stderr: 'plantstore: plants.db exists; restore will not replace it without --force\n' })
    expect(contentsOf(folder)).toEqual(before)
  })

  it('the store itself as FILE', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'plants.db'), 2)
    const before = contentsOf(folder)

    const run = await restore(folder, `sqlite:${join(folder, 'plants.db')}`, 'plants.db', '--force')

    expect(run).toEqual({ code: 1, signal: null, stdout: '', stderr: 'plantstore: cannot restore plants.db: it is the store of DATABASE_URL itself\n' })
    expect(contentsOf(folder)).toEqual(before)
  })

  it('a FILE that does not exist, making no folder for a store that does not exist either', async () => {
    const folder = temporaryFolder()

    const run = await restore(folder, 'sqlite:data/plants.db', 'backup.db')

    expect(run).toMatchObject({ code: 1, stderr: 'plantstore: cannot restore backup.db: it does not exist\n' })
    expect(existsSync(join(folder, 'data'))).toBe(false)
  })

  const stores = [
    { kind: 'a memory store', databaseUrl: 'memory:', stderr: 'DATABASE_URL is "memory:": restore writes a SQLite store; set DATABASE_URL to sqlite:PATH' },
    {
      kind: 'a PostgreSQL store',
      databaseUrl: 'postgresql://plantstore@127.0.0.1:1/plantstore',
      stderr: 'DATABASE_URL is a PostgreSQL store: restore PostgreSQL with pg_restore, or copy a SQLite backup into it with plantstore copy; see docs/guides/backups.md'
    }
  ]
  for (const { kind, databaseUrl, stderr } of stores) {
    it(`into ${kind}, saying what to use instead`, async () => {
      const folder = temporaryFolder()
      copyFileSync(new URL('../fixtures/release-1.0.0.db', import.meta.url), join(folder, 'backup.db'))

      const run = await restore(folder, databaseUrl, 'backup.db', '--force')

      expect(run).toEqual({ code: 1, signal: null, stdout: '', stderr: `plantstore: ${stderr}\n` })
      expect(filesIn(folder)).toEqual(['backup.db'])
    })
  }
})
