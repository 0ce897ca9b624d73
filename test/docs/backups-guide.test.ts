import { spawn } from 'node:child_process'
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { outputOf, type ChildOutput } from '../helpers/child-output.js'
import { CLI } from '../helpers/cli-process.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer, type ServerProcess } from '../helpers/server-process.js'

/**
 * Runs the `sh` blocks of docs/guides/backups.md, in page order and exactly as written, the way an
 * operator follows the guide in a checkout: a service on SQLite with plants and a stored token, its
 * backup taken while it runs, a restore, exports over the command line and HTTP, an import, and the move
 * to PostgreSQL, checked after each step through the service or the files the step made. The page says
 * `npx plantstore`, as in a checkout; here `npx` is a stand-in on the PATH that runs this checkout's
 * command for `npx plantstore` and refuses anything else, so the test never asks the npm registry.
 */

const PAGE = 'docs/guides/backups.md'
const ADMIN_TOKEN = 'backups-guide-admin-token-61d2'
const SECRETS_KEY = 'f'.repeat(64)

/** The commands of the page's `sh` blocks, a line each (continuations joined). */
function shellCommandsOf (page: string): string[] {
  const blocks = [...page.matchAll(/^( *)```sh\n([\s\S]*?)^\1```$/gm)].map((match) => (match[2] ?? '').replace(new RegExp(`^${match[1] ?? ''}`, 'gm'), ''))
  return blocks.flatMap((block) => block.replace(/\\\n\s*/g, '').split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#')))
}

function sh (command: string, cwd: string, env: Record<string, string>): Promise<ChildOutput> {
  return outputOf(spawn('bash', ['-euo', 'pipefail', '-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] }))
}

describe(PAGE, () => {
  it('does what it says, command by command', async () => {
    const commands = shellCommandsOf(readFileSync(PAGE, 'utf8'))
    const cwd = temporaryFolder()
    const bin = join(cwd, 'bin')
    mkdirSync(bin)
    writeFileSync(join(bin, 'npx'), `#!/bin/sh\n[ "$1" = plantstore ] || { echo "npx: this test runs only npx plantstore" >&2; exit 127; }\nshift\nexec "${process.execPath}" "${CLI}" "$@"\n`)
    chmodSync(join(bin, 'npx'), 0o755)
    const postgresUrl = await createTestDatabase()
    const environment = {
      PATH: `${bin}:${process.env.PATH ?? ''}`,
      DATABASE_URL: 'sqlite:./data/plantstore.db',
      PLANTSTORE_TOKENS: `name=ops;scopes=admin+plants:read+plants:write;${ADMIN_TOKEN}`,
      WEBHOOK_SECRETS_KEY: SECRETS_KEY,
      POSTGRES_URL: postgresUrl,
      ADMIN_TOKEN
    }
    let service: (ServerProcess & { baseUrl: string }) | undefined
    const start = async (databaseUrl = environment.DATABASE_URL) => {
      service = await startServer({ ...environment, DATABASE_URL: databaseUrl }, { cwd })
      return service
    }
    const stop = async () => {
      if (service === undefined) return
      process.kill(service.child.pid as number, 'SIGTERM')
      expect(await service.exited).toBe(0)
      service = undefined
    }
    const call = async (method: string, path: string, token: string, body?: string) => {
      const response = await fetch(`${service?.baseUrl ?? ''}${path}`, {
        method, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body })
      })
      return { status: response.status, body: await response.text() }
    }
    const run = async (command: string, env: Record<string, string> = {}) => {
      expect(commands.shift(), 'the next command of the page').toBe(command)
      const result = await sh(command, cwd, { ...environment, PLANTSTORE_URL: service?.baseUrl ?? '', ...env })
      expect(result.code, `${command}\n${result.stderr}`).toBe(0)
      return result
    }

    // A running service with plants and a token made through the API.
    await start()
    for (let id = 1; id <= 300; id++) {
      expect((await call('POST', '/plants', ADMIN_TOKEN, `{"id":${id},"name":"plant ${id}"${id % 3 === 0 ? ',"tag":"shade"' : ''}}`)).status).toBe(200)
    }
    const made = await call('POST', '/admin/tokens', ADMIN_TOKEN, '{"name":"dashboard","scopes":["plants:read"]}')
    expect(made.status).toBe(201)
    const dashboardToken = (JSON.parse(made.body) as { token: string }).token

    await run('mkdir -p backups && npx plantstore backup backups/plantstore.db')
    expect((await call('POST', '/plants', ADMIN_TOKEN, '{"id":301,"name":"after the backup"}')).status).toBe(200)

    await stop()
    await run('npx plantstore restore backups/plantstore.db --force')
    await start()
    expect(await call('GET', '/plants/300', dashboardToken)).toEqual({ status: 200, body: '{"id":300,"name":"plant 300","tag":"shade"}' })
    expect((await call('GET', '/plants/301', dashboardToken)).status).toBe(404)

    await run('npx plantstore export --out backups/plants.ndjson')
    const expected = Array.from({ length: 300 }, (_, index) => `{"id":${index + 1},"name":"plant ${index + 1}"${(index + 1) % 3 === 0 ? ',"tag":"shade"' : ''}}\n`).join('')
    expect(readFileSync(join(cwd, 'backups/plants.ndjson'), 'utf8')).toBe(expected)

    await run('curl --fail --silent --show-error -H "Authorization: Bearer $ADMIN_TOKEN" "$PLANTSTORE_URL/admin/export" > backups/plants-over-http.ndjson')
    expect(readFileSync(join(cwd, 'backups/plants-over-http.ndjson'), 'utf8')).toBe(expected)

    const imported = await run('npx plantstore import backups/plants.ndjson', { DATABASE_URL: 'sqlite:./data/imported.db' })
    expect(imported.stdout).toMatch(/^imported backups\/plants\.ndjson: 300 lines: 300 created, 0 unchanged, 0 replaced, 0 conflicts, 0 rejected in \d+\.\d s\n$/)

    await stop()
    await run('npx plantstore copy --from "sqlite:$PWD/data/plantstore.db" --to "$POSTGRES_URL"')
    const sqliteHash = await run('DATABASE_URL="sqlite:$PWD/data/plantstore.db" npx plantstore export | sha256sum')
    const postgresHash = await run('DATABASE_URL="$POSTGRES_URL" npx plantstore export | sha256sum')
    expect(postgresHash.stdout).toBe(sqliteHash.stdout)
    expect(sqliteHash.stdout).toMatch(/^[0-9a-f]{64} {2}-\n$/)

    await start(postgresUrl)
    expect(await call('GET', '/plants/3', dashboardToken)).toEqual({ status: 200, body: '{"id":3,"name":"plant 3","tag":"shade"}' })
    await stop()
    expect(commands).toEqual([])
  }, 120_000)
})
