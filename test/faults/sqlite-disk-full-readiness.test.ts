import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { until } from '../helpers/load.js'
import { NO_LOAD_SHEDDING } from '../helpers/server-process.js'

const SERVER_ENTRY = fileURLToPath(new URL('../../dist/server.js', import.meta.url))
const TOKEN = 'disk-full-readiness-token'
const ADMIN_TOKEN = 'disk-full-readiness-admin-token'

/**
 * The service in a mount namespace of its own (`unshare --mount`, as root) where a 4 MB tmpfs is mounted
 * on `full`, which holds its SQLite file. `exec` keeps one process: the PID is the server's, and
 * `nsenter --mount` runs commands in its namespace (no other mount is touched; the tmpfs ends with it).
 */
async function serverOnSmallDisk (folder: string) {
  mkdirSync(join(folder, 'full'))
  const child = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c',
    `mount -t tmpfs -o size=4m plantstore-full-disk full && exec "${process.execPath}" "${SERVER_ENTRY}"`], {
    cwd: folder,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', ...NO_LOAD_SHEDDING, DATABASE_URL: 'sqlite:full/plants.db', PLANTSTORE_TOKENS: `${TOKEN},name=admin;scopes=admin;${ADMIN_TOKEN}` },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid as number, 'SIGKILL')
  })
  await until(() => /Server listening at http:/.test(stdout), 15_000, 'the service to listen')
  const baseUrl = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1] as string
  // `cd` inside: a working directory inherited from outside is the folder under the tmpfs, not the tmpfs.
  const inNamespace = (script: string) => {
    const run = spawnSync('nsenter', ['--target', String(child.pid), '--mount', 'sh', '-c', `cd "${folder}" && ${script}`])
    if (run.status !== 0) throw new Error(`${script}: exit ${run.status}: ${run.stderr.toString()}`)
  }
  return { child, baseUrl, inNamespace }
}

describe('A SQLite disk that fills up under a running service', () => {
  it('makes /readyz 503 with Retry-After while the disk is full and 200 again once space is freed, as writes go', { timeout: 60_000 }, async () => {
    const folder = temporaryFolder()
    const server = await serverOnSmallDisk(folder)
    const ready = async () => {
      const response = await fetch(`${server.baseUrl}/readyz`, { signal: AbortSignal.timeout(5000) })
      return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.json() as unknown }
    }
    let id = 0
    const write = async () => (await fetch(`${server.baseUrl}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: ++id, name: 'Fern' }),
      signal: AbortSignal.timeout(10_000)
    })).status

    const createToken = async () => (await fetch(`${server.baseUrl}/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `token-${++id}`, scopes: ['plants:read'] }),
      signal: AbortSignal.timeout(10_000)
    })).status

    const before = { ready: await ready(), write: await write(), token: await createToken() }
    // dd stops at ENOSPC: the tmpfs is full.
    server.inNamespace('dd if=/dev/zero of=full/filler bs=64k 2>/dev/null; true')
    const whileFull = { ready: await ready(), write: await write(), token: await createToken() }
    server.inNamespace('rm full/filler')
    const afterwards = { ready: await ready(), write: await write(), token: await createToken() }

    expect(before).toEqual({ ready: { status: 200, retryAfter: null, body: { status: 'ok' } }, write: 200, token: 201 })
    expect(whileFull).toEqual({ ready: { status: 503, retryAfter: '1', body: { error: 503, message: expect.stringMatching(/^storage is unavailable, retry later; request id /) } }, write: 503, token: 503 })
    expect(afterwards).toEqual({ ready: { status: 200, retryAfter: null, body: { status: 'ok' } }, write: 200, token: 201 })
    expect(server.child.exitCode).toBeNull()
  })
})
