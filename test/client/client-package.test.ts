import { execFile } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { TEST_TOKEN, temporaryFolder } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'

const CLIENT_FOLDER = fileURLToPath(new URL('../../clients/typescript/', import.meta.url))
const CONSUMER = fileURLToPath(new URL('../fixtures/client-package/use.ts', import.meta.url))
const TSC = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url))

/** The environment without what `npm test` hands its children (npm_config_*, npm_package_*): each npm here reads only its own folder. */
function environment (): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')))
  return { ...env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' }
}

async function run (file: string, args: readonly string[], cwd: string, env = environment()): Promise<string> {
  const { stdout } = await promisify(execFile)(file, args, { cwd, env, timeout: 60_000 })
  return stdout
}

interface PackResult {
  readonly filename: string
  readonly files: ReadonlyArray<{ readonly path: string }>
}

describe('The @plantstore/client tarball', () => {
  it('packs (building first), installs into an empty project offline, type-checks there and works against a live service', { timeout: 90_000 }, async () => {
    const folder = temporaryFolder()
    const [packed] = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', folder], CLIENT_FOLDER)) as PackResult[]
    const files = packed!.files.map((file) => file.path).sort()
    expect(files).toEqual(expect.arrayContaining(['README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/generated/openapi.d.ts']))
    expect(files.filter((path) => !path.startsWith('dist/') && path !== 'README.md' && path !== 'package.json')).toEqual([])

    const project = join(folder, 'project')
    mkdirSync(project)
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'empty-project', private: true, type: 'module' }))
    await run('npm', ['install', '--offline', join(folder, packed!.filename)], project)
    expect(existsSync(join(project, 'node_modules/@plantstore/client/dist/index.js'))).toBe(true)

    copyFileSync(CONSUMER, join(project, 'use.ts'))
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'], types: [], strict: true, exactOptionalPropertyTypes: true, skipLibCheck: false },
      files: ['use.ts']
    }))
    await run(process.execPath, [TSC, '-p', project], project)

    const service = await startServer({ DATABASE_URL: `sqlite:${join(folder, 'plants.db')}`, PLANTSTORE_TOKENS: TEST_TOKEN })
    const output = await run(process.execPath, ['use.js'], project, { PATH: process.env.PATH ?? '', PLANTSTORE_URL: service.baseUrl, PLANTSTORE_TOKEN: TEST_TOKEN })
    const monstera = { id: '9007199254740993n', name: 'Monstera deliciosa' }
    expect(JSON.parse(output)).toEqual({
      created: { ...monstera, tag: 'tropical' },
      read: { ...monstera, tag: 'tropical' },
      sameEtag: true,
      patched: monstera,
      listed: [monstera],
      counted: 1,
      missing: '404 no plant has id 9007199254740994'
    })
  })
})
