import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'
import { freePort } from '../../scripts/embedded-postgres.js'
import { temporaryFolder } from '../helpers/app.js'
import { startServer, type ServerProcess } from '../helpers/server-process.js'

/**
 * Runs the example of docs/guides/keep-a-copy.md, docs/examples/keep-a-copy.mjs, as the guide says: a
 * real service on SQLite, the script as a process of its own with a plants:read token, writes of every
 * kind before it starts and while it follows. In the middle the service is killed (kill -9) and started
 * again on its port, and the script too, which then goes on from its files. At the end its copy is the
 * store's export byte for byte, and its seq the head.
 */

const SCRIPT = fileURLToPath(new URL('../../docs/examples/keep-a-copy.mjs', import.meta.url))
const COPIER_TOKEN = 'keep-a-copy-copier-8d1f'
const WRITER_TOKEN = 'keep-a-copy-writer-27ce'
const ADMIN_TOKEN = 'keep-a-copy-admin-f04a'
const TOKENS = [
  `name=copier;scopes=plants:read;${COPIER_TOKEN}`, `name=writer;scopes=plants:read+plants:write;${WRITER_TOKEN}`, `name=ops;scopes=admin;${ADMIN_TOKEN}`
].join(',')

describe('docs/guides/keep-a-copy.md', () => {
  it('keeps a copy equal to the store through kill -9 of the service and of the copier, from its example script', async () => {
    const cwd = temporaryFolder()
    const copyFile = join(cwd, 'plants-copy.ndjson')
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    const serviceEnv = { DATABASE_URL: `sqlite:${join(cwd, 'plants.db')}`, PLANTSTORE_TOKENS: TOKENS, PORT: String(port) }
    let service: ServerProcess = await startServer(serviceEnv)
    const send = async (method: string, path: string, body?: string) => {
      const contentType = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json'
      const response = await fetch(`${base}${path}`, {
        method, headers: { authorization: `Bearer ${WRITER_TOKEN}`, ...(body === undefined ? {} : { 'content-type': contentType }) }, ...(body === undefined ? {} : { body })
      })
      expect(response.status, `${method} ${path}: ${await response.text()}`).toBeLessThan(300)
    }
    const killService = async () => {
      process.kill(service.child.pid as number, 'SIGKILL')
      await service.exited
    }

    // Before the copier starts: plants at the int64 edges, names that need escaping.
    for (const [id, plant] of [
      ['9223372036854775807', '"name":"Max","tag":"edge"'], ['-9223372036854775808', '"name":"Min"'], ['9007199254740993', '"name":"Above 2^53"'],
      ['1', '"name":"Fern \\"the first\\"","tag":"shade"'], ['2', '"name":"Moss \\u2028 ü 🌿","tag":""'], ['3', '"name":"Ivy"']
    ] as const) await send('POST', '/plants', `{"id":${id},${plant}}`)
    for (let id = 10; id < 40; id++) await send('PUT', `/plants/${id}`, JSON.stringify({ name: `plant ${id}`, tag: id % 2 === 0 ? 'even' : 'odd' }))
    let copier = startCopier(cwd, base, copyFile)
    const savedSeq = () => existsSync(`${copyFile}.seq`) ? BigInt(readFileSync(`${copyFile}.seq`, 'utf8')) : -1n
    // It has read the head and the plants once it has saved.
    await expect.poll(savedSeq, { timeout: 10_000 }).toBe(36n)

    // While it follows: updates, deletes, an undelete, a batch.
    for (let id = 10; id < 20; id++) await send('PATCH', `/plants/${id}`, JSON.stringify({ name: `plant ${id}, renamed` }))
    await send('DELETE', '/plants/3')
    await send('DELETE', '/plants/-9223372036854775808')
    await send('POST', '/plants/batch', JSON.stringify({ operations: [{ method: 'PUT', id: 3, body: { name: 'Ivy again' } }, { method: 'DELETE', id: 11 }] }))

    // The service dies mid-way (the copier has followed some of the changes), and comes back on its port a moment later.
    await expect.poll(savedSeq, { timeout: 10_000 }).toBeGreaterThan(36n)
    await killService()
    await new Promise((resolve) => setTimeout(resolve, 1500))
    service = await startServer(serviceEnv)
    for (let id = 40; id < 50; id++) await send('POST', '/plants', JSON.stringify({ id, name: `after the restart ${id}` }))
    await send('PATCH', '/plants/9223372036854775807', '{"tag":null}')

    // The copier dies too; what it saved carries it on.
    await copier.kill()
    for (let id = 20; id < 30; id++) await send('DELETE', `/plants/${id}`)
    await send('PUT', '/plants/9007199254740993', '{"name":"Above 2^53","tag":"moved"}')
    copier = startCopier(cwd, base, copyFile)

    const exported = async () => {
      const response = await fetch(`${base}/admin/export`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      expect(response.status).toBe(200)
      return await response.text()
    }
    const head = async () => (await (await fetch(`${base}/plants/changes/head`, { headers: { authorization: `Bearer ${COPIER_TOKEN}` } })).text())
    const store = await exported()
    const copied = () => existsSync(`${copyFile}.seq`) ? { copy: readFileSync(copyFile, 'utf8'), seq: `{"seq":${readFileSync(`${copyFile}.seq`, 'utf8').trim()}}` } : undefined
    await expect.poll(copied, { timeout: 15_000, interval: 200 }).toEqual({ copy: store, seq: await head() })
    // 36 plants, then 3 and the least deleted, 3 back, 11 deleted, 10 created, 10 deleted: 34 lines.
    expect(store.split('\n').length - 1).toBe(34)
    expect(copier.stderr()).toBe('')
  }, 60_000)
})

interface Copier {
  readonly child: ChildProcess
  readonly stderr: () => string
  /** SIGKILL, and waits for the exit. */
  readonly kill: () => Promise<void>
}

/** Runs the guide's script as the guide runs it: `node docs/examples/keep-a-copy.mjs`, with its three variables. */
function startCopier (cwd: string, base: string, copyFile: string): Copier {
  const child = spawn(process.execPath, [SCRIPT], {
    cwd, env: { PATH: process.env.PATH ?? '', PLANTSTORE_URL: base, PLANTSTORE_TOKEN: COPIER_TOKEN, COPY_FILE: copyFile }, stdio: ['ignore', 'ignore', 'pipe']
  })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  }
  onTestFinished(end)
  return { child, stderr: () => stderr, kill: end }
}
