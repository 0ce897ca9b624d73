import { mkdirSync, readdirSync, readFileSync, watch, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import Database from '../../src/store/sqlite/driver.js'
import { openSqliteStore } from '../../src/store/sqlite/store.js'
import { temporaryFolder } from '../helpers/app.js'
import { runCli } from '../helpers/cli-process.js'

/** `plantstore export` as a real process: to stdout, to a file through a temporary name, by tag, interrupted. */

const PLANTS = '{"id":-3,"name":"Aloe","tag":"sun"}\n{"id":1,"name":"Monstera"}\n{"id":2,"name":"Fern","tag":"shade"}\n{"id":5,"name":"Cactus","tag":"sun"}\n'

async function storeWith (plants: string): Promise<{ readonly cwd: string, readonly env: Record<string, string> }> {
  const cwd = temporaryFolder()
  const folder = { cwd, env: { DATABASE_URL: `sqlite:${join(cwd, 'plants.db')}` } }
  if (plants !== '') expect((await runCli(['import', '-'], { ...folder, stdin: plants })).code).toBe(0)
  return folder
}

describe('plantstore export', () => {
  it('writes every plant to stdout as NDJSON, by id, and nothing else', async () => {
    const folder = await storeWith(PLANTS)

    const run = await runCli(['export'], folder)

    expect(run).toMatchObject({ code: 0, stdout: PLANTS, stderr: '' })
  })

  it('--tag writes only the plants with exactly that tag', async () => {
    const folder = await storeWith(PLANTS)

    const run = await runCli(['export', '--tag', 'sun'], folder)

    expect(run).toMatchObject({ code: 0, stdout: '{"id":-3,"name":"Aloe","tag":"sun"}\n{"id":5,"name":"Cactus","tag":"sun"}\n', stderr: '' })
  })

  it('--out writes the file and says so on stderr, leaving no temporary file behind', async () => {
    const folder = await storeWith(PLANTS)

    const run = await runCli(['export', '--out', 'plants.ndjson'], folder)

    expect({ code: run.code, stdout: run.stdout, stderr: run.stderr.replace(/\d+\.\d s/, 'T s') })
      .toEqual({ code: 0, stdout: '', stderr: 'exported 4 plants to plants.ndjson in T s\n' })
    expect(readFileSync(join(folder.cwd, 'plants.ndjson'), 'utf8')).toBe(PLANTS)
    expect(readdirSync(folder.cwd).filter((name) => !name.startsWith('plants.db')).sort()).toEqual(['plants.ndjson'])
  })

  it('Given the --out file exists, Then it is refused and left untouched, unless --force', async () => {
    const folder = await storeWith(PLANTS)
    writeFileSync(join(folder.cwd, 'plants.ndjson'), 'keep me\n')

    const refused = await runCli(['export', '--out', 'plants.ndjson'], folder)
    const kept = readFileSync(join(folder.cwd, 'plants.ndjson'), 'utf8')
    const forced = await runCli(['export', '--out', 'plants.ndjson', '--force'], folder)

    expect(refused).toMatchObject({ code: 1, stdout: '', stderr: 'plantstore: plants.ndjson exists; export will not replace it without --force\n' })
    expect(kept).toBe('keep me\n')
    expect(forced.code).toBe(0)
    expect(readFileSync(join(folder.cwd, 'plants.ndjson'), 'utf8')).toBe(PLANTS)
  })

  it('Given a folder that does not exist for --out, Then it fails in one line', async () => {
    const folder = await storeWith(PLANTS)

    const run = await runCli(['export', '--out', 'missing/plants.ndjson'], folder)

    expect(run).toMatchObject({ code: 1, stdout: '', stderr: 'plantstore: cannot write the export to missing/plants.ndjson (ENOENT); nothing was written\n' })
  })

  it('refuses --force without --out, and a tag that breaks the tag rule, as usage errors', async () => {
    const folder = await storeWith('')

    const force = await runCli(['export', '--force'], folder)
    const tag = await runCli(['export', '--tag', 'x'.repeat(257)], folder)

    expect(force).toMatchObject({ code: 2, stderr: 'plantstore: --force is for --out FILE: it lets the export replace that file (see "plantstore export --help")\n' })
    expect(tag).toMatchObject({ code: 2, stderr: 'plantstore: --tag must be at most 256 characters long (see "plantstore export --help")\n' })
  })

  it('Given an empty store, Then the export is empty', async () => {
    const folder = await storeWith('')

    expect(await runCli(['export'], folder)).toMatchObject({ code: 0, stdout: '', stderr: '' })
  })

  it('Given Ctrl-C while a large export is written to a file, Then no file is left under the final name, nor a temporary one', async () => {
    const cwd = temporaryFolder()
    const file = join(cwd, 'plants.db')
    await openSqliteStore(file).close()
    const db = new Database(file)
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
             INSERT INTO plants (id, name, tag) SELECT i, 'plant number ' || i, 'tag ' || (i % 10) FROM n`)
    db.close()
    const out = join(cwd, 'out')
    mkdirSync(out)
    const watcher = watch(out)

    const run = await runCli(['export', '--out', 'out/plants.ndjson'], {
      cwd,
      env: { DATABASE_URL: `sqlite:${file}` },
      started: (child) => watcher.once('change', () => { child.kill('SIGINT') })
    })
    watcher.close()

    expect(run).toMatchObject({ code: 130, stdout: '', stderr: 'plantstore: interrupted by SIGINT; nothing was left half-written\n' })
    expect(readdirSync(out)).toEqual([])
  })
})
