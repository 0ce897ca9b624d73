import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { temporaryFolder } from '../helpers/app.js'
import { runCli, type CliRun } from '../helpers/cli-process.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

/**
 * `plantstore import FILE|-` as a real process on real stores: what each kind of line does, what is
 * reported, the counts, the exit code, and what the store holds afterwards (read back with `export`).
 */

interface Folder { readonly cwd: string, readonly env: Record<string, string> }

function sqliteFolder (): Folder {
  const cwd = temporaryFolder()
  return { cwd, env: { DATABASE_URL: `sqlite:${join(cwd, 'plants.db')}` } }
}

async function postgresFolder (): Promise<Folder> {
  return { cwd: temporaryFolder(), env: { DATABASE_URL: await createTestDatabase() } }
}

const importFile = (folder: Folder, text: string | Buffer, ...options: string[]): Promise<CliRun> => {
  writeFileSync(join(folder.cwd, 'plants.ndjson'), text)
  return runCli(['import', 'plants.ndjson', ...options], folder)
}
const exported = async (folder: Folder): Promise<string> => {
  const run = await runCli(['export'], folder)
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' })
  return run.stdout
}
/** The summary line with its time replaced, so it can be compared whole. */
const summary = (run: CliRun) => run.stdout.replace(/ in \d+\.\d s/, ' in T s')

const MIXED = Buffer.concat([
  Buffer.from([0xef, 0xbb, 0xbf]),
  Buffer.from([
    '{"id":1,"name":"Monstera"}\r',
    '',
    '{"id":2,"name":"Fern","tag":"shade"}\r',
    '{"id":1.0,"name":"Monstera"}',
    '{"id":1,"name":"Swiss cheese plant"}',
    'not json',
    '{"id":9223372036854775808,"name":"too big"}',
    '{"id":3,"name":""}',
    '{"id":4,"name":"Aloe","tag":"sun","colour":"green"}',
    '   ',
    '{"id":-9223372036854775808,"name":"min"}',
    '{"id":"5","name":"text id"}',
    '[1,2]',
    ''
  ].join('\n'))
])

describe('plantstore import: every kind of line', () => {
  it('Given a file with a byte order mark, CRLF ends, blank lines, a replay, a conflict and bad lines, When imported, Then each good line is created once and every other line is reported by number', async () => {
    const folder = sqliteFolder()

    const run = await importFile(folder, MIXED)

    expect(run.code).toBe(1)
    expect(run.stderr).toBe([
      'plantstore: plants.ndjson line 5: conflict: the id 1 is stored with another name or tag: {"id":1,"name":"Monstera"}',
      'plantstore: plants.ndjson line 6: rejected: not JSON: unexpected character at position 0',
      'plantstore: plants.ndjson line 7: rejected: id must be an integer from -9223372036854775808 to 9223372036854775807',
      'plantstore: plants.ndjson line 8: rejected: name must be at least 1 character long',
      'plantstore: plants.ndjson line 12: rejected: id must be an integer from -9223372036854775808 to 9223372036854775807',
      'plantstore: plants.ndjson line 13: rejected: the line must be a JSON object',
      ''
    ].join('\n'))
    expect(summary(run)).toBe('imported plants.ndjson: 11 lines: 4 created, 1 unchanged, 0 replaced, 1 conflict, 5 rejected in T s\n')
    expect(await exported(folder)).toBe([
      '{"id":-9223372036854775808,"name":"min"}',
      '{"id":1,"name":"Monstera"}',
      '{"id":2,"name":"Fern","tag":"shade"}',
      '{"id":4,"name":"Aloe","tag":"sun"}',
      ''
    ].join('\n'))
  })

  it('Given a file already imported, When imported again, Then nothing changes and the summary says so', async () => {
    const folder = sqliteFolder()
    const lines = '{"id":1,"name":"Monstera"}\n{"id":2,"name":"Fern","tag":"shade"}\n'
    expect((await importFile(folder, lines)).code).toBe(0)
    const before = await exported(folder)

    const again = await importFile(folder, lines)

    expect({ code: again.code, stderr: again.stderr, stdout: summary(again) }).toEqual({
      code: 0, stderr: '', stdout: 'imported plants.ndjson: 2 lines: 0 created, 2 unchanged, 0 replaced, 0 conflicts, 0 rejected in T s; nothing changed\n'
    })
    expect(await exported(folder)).toBe(before)
  })

  it('Given a line longer than 64 KiB and one that is not UTF-8, When imported, Then both are rejected and the lines around them are taken', async () => {
    const folder = sqliteFolder()
    const text = Buffer.concat([
      Buffer.from(`{"id":1,"name":"a"}\n{"id":2,"name":"${'x'.repeat(70_000)}"}\n`),
      Buffer.from([0x7b, 0xff, 0x7d, 0x0a]),
      Buffer.from('{"id":3,"name":"c"}')
    ])

    const run = await importFile(folder, text)

    expect({ code: run.code, stderr: run.stderr, stdout: summary(run) }).toEqual({
      code: 1,
      stderr: 'plantstore: plants.ndjson line 2: rejected: the line is longer than 65536 bytes\n' +
        'plantstore: plants.ndjson line 3: rejected: the line is not valid UTF-8\n',
      stdout: 'imported plants.ndjson: 4 lines: 2 created, 0 unchanged, 0 replaced, 0 conflicts, 2 rejected in T s\n'
    })
    expect(await exported(folder)).toBe('{"id":1,"name":"a"}\n{"id":3,"name":"c"}\n')
  })
})

describe('plantstore import --on-conflict', () => {
  const STORED = '{"id":1,"name":"Monstera"}\n{"id":2,"name":"Fern","tag":"shade"}\n'
  const INCOMING = '{"id":3,"name":"Aloe"}\n{"id":2,"name":"Fern"}\n{"id":4,"name":"Cactus","tag":"sun"}\n{"id":1,"name":"Monstera"}\n'

  it('replace: stores the line\'s plant in place of the stored one, and exits 0', async () => {
    const folder = sqliteFolder()
    await importFile(folder, STORED)

    const run = await importFile(folder, INCOMING, '--on-conflict=replace')

    expect({ code: run.code, stderr: run.stderr, stdout: summary(run) }).toEqual({
      code: 0, stderr: '', stdout: 'imported plants.ndjson: 4 lines: 2 created, 1 unchanged, 1 replaced, 0 conflicts, 0 rejected in T s\n'
    })
    expect(await exported(folder)).toBe('{"id":1,"name":"Monstera"}\n{"id":2,"name":"Fern"}\n{"id":3,"name":"Aloe"}\n{"id":4,"name":"Cactus","tag":"sun"}\n')
  })

  it('fail: stops at the conflicting line; the lines before it are imported and none from it on', async () => {
    const folder = sqliteFolder()
    await importFile(folder, STORED)

    const run = await importFile(folder, INCOMING, '--on-conflict', 'fail')

    expect({ code: run.code, stderr: run.stderr, stdout: summary(run) }).toEqual({
      code: 1,
      stderr: 'plantstore: plants.ndjson line 2: conflict: the id 2 is stored with another name or tag: {"id":2,"name":"Fern","tag":"shade"}\n',
      stdout: 'imported plants.ndjson: 2 lines: 1 created, 0 unchanged, 0 replaced, 1 conflict, 0 rejected in T s; ' +
        'stopped at line 2 (--on-conflict=fail): no line from it on was written\n'
    })
    expect(await exported(folder)).toBe(`${STORED}{"id":3,"name":"Aloe"}\n`)
  })

  it('fail: a conflict between two lines of the file is found before either is written past the first', async () => {
    const folder = sqliteFolder()

    const run = await importFile(folder, '{"id":7,"name":"a"}\n{"id":8,"name":"b"}\n{"id":7,"name":"c"}\n{"id":9,"name":"d"}\n', '--on-conflict=fail')

    expect(run.stderr).toBe('plantstore: plants.ndjson line 3: conflict: the id 7 is given by an earlier line with another name or tag: {"id":7,"name":"a"}\n')
    expect(await exported(folder)).toBe('{"id":7,"name":"a"}\n{"id":8,"name":"b"}\n')
  })

  it('refuses a policy it does not know, with a usage error', async () => {
    const folder = sqliteFolder()

    const run = await importFile(folder, STORED, '--on-conflict=skip')

    expect(run).toMatchObject({
      code: 2, stdout: '', stderr: 'plantstore: --on-conflict must be one of report, replace, fail, got "skip" (see "plantstore import --help")\n'
    })
  })
})

describe('plantstore import: input and stores', () => {
  it('reads standard input for -, and --json prints the counts as one document', async () => {
    const folder = sqliteFolder()

    const run = await runCli(['import', '-', '--json'], { ...folder, stdin: '{"id":1,"name":"a"}\n{"id":1,"name":"b"}\n' })

    expect(run.code).toBe(1)
    expect(run.stderr).toBe('plantstore: stdin line 2: conflict: the id 1 is stored with another name or tag: {"id":1,"name":"a"}\n')
    expect(JSON.parse(run.stdout)).toEqual({ lines: 2, created: 1, unchanged: 0, replaced: 0, conflicts: 1, rejected: 0, seconds: expect.any(Number) })
  })

  it('Given a file that does not exist, Then it says so in one line, exits 1 and creates no store', async () => {
    const folder = sqliteFolder()

    const run = await runCli(['import', 'missing.ndjson'], folder)

    expect(run).toMatchObject({ code: 1, stdout: '', stderr: 'plantstore: cannot read missing.ndjson (ENOENT)\n' })
  })

  it('refuses a memory store, which only its service can reach', async () => {
    const run = await runCli(['import', '-'], { cwd: temporaryFolder(), env: { DATABASE_URL: 'memory:' }, stdin: '{"id":1,"name":"a"}\n' })

    expect(run).toMatchObject({
      code: 1,
      stderr: 'plantstore: DATABASE_URL is "memory:": a memory store lives only inside the running service, so import cannot reach it; POST the plants to the service instead\n'
    })
  })

  it('Given PostgreSQL cannot be reached, Then it fails in one line naming the database', async () => {
    const run = await runCli(['import', '-'], {
      cwd: temporaryFolder(), env: { DATABASE_URL: 'postgres://plantstore@127.0.0.1:9/none', DATABASE_CONNECT_TIMEOUT_MS: '500' }, stdin: '{"id":1,"name":"a"}\n'
    })

    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toMatch(/^plantstore: the database is unavailable: [^\n]+\n$/)
  })

  it('Given a webhook subscription, When plants are imported, Then each created plant raises its event, as a POST would', async () => {
    const folder = sqliteFolder()
    const store = openSqliteStore(join(folder.cwd, 'plants.db'))
    await store.webhooks.createSubscription({ id: 'b0c5a3c2-6a7e-4b8e-9d4e-1f2a3b4c5d6e', url: 'https://example.org/hook', events: ['plant.created'], createdAt: Date.now(), storedSecret: 'sealed' })
    await store.close()

    await importFile(folder, '{"id":1,"name":"a"}\n{"id":2,"name":"b"}\n')
    await importFile(folder, '{"id":1,"name":"a"}\n{"id":3,"name":"c"}\n')

    const reopened = openSqliteStore(join(folder.cwd, 'plants.db'))
    const backlog = await reopened.webhooks.backlog()
    await reopened.close()
    expect(backlog.pending).toBe(3)
  })
})

describe.each([
  ['SQLite to PostgreSQL', sqliteFolder, postgresFolder],
  ['PostgreSQL to SQLite', postgresFolder, async () => sqliteFolder()]
] as const)('export and import, %s', (_name, source, target) => {
  it('Given a store, When its export is imported into an empty one, Then the exports of the two are byte for byte the same', async () => {
    const from = await source()
    const to = await target()
    const lines = Array.from({ length: 2500 }, (_, index) => {
      const id = index % 2 === 0 ? BigInt(index) * 3_689_348_814_741_910n : BigInt(-index)
      return `{"id":${id},"name":"plant ${index} \\u00e9 🌵"${index % 3 === 0 ? '' : `,"tag":"${index % 3 === 1 ? '' : 'tropical'}"`}}`
    })
    expect((await importFile(from, lines.join('\n'))).code).toBe(0)
    const fromExport = await exported(from)
    writeFileSync(join(to.cwd, 'export.ndjson'), fromExport)

    const run = await runCli(['import', 'export.ndjson'], to)

    expect({ code: run.code, stderr: run.stderr, stdout: summary(run) }).toEqual({
      code: 0, stderr: '', stdout: 'imported export.ndjson: 2500 lines: 2500 created, 0 unchanged, 0 replaced, 0 conflicts, 0 rejected in T s\n'
    })
    expect(await exported(to)).toBe(fromExport)
    expect(fromExport.split('\n')).toHaveLength(2501)
  })
})
