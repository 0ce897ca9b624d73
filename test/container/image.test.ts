import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { connect, createServer } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'

/**
 * The container image as users run it: `npm run test:container` after scripts/container/build-image.sh.
 * Every container gets podman's flags for this kind of machine (scripts/container/podman.sh), the host's
 * network with the service on 127.0.0.1 only, a read-only root filesystem and /tmp as a tmpfs.
 */
const IMAGE = process.env.PLANTSTORE_IMAGE ?? 'localhost/plantstore:ci'
const PODMAN_RUN_FLAGS = ['--runtime', 'runc', '--network', 'host', '--ulimit', 'nofile=4096:4096', '--ulimit', 'nproc=4096:4096']
const BIG_ID = '9007199254740993'

interface Result { readonly code: number, readonly stdout: string, readonly stderr: string }

function podman (args: readonly string[], timeoutMs = 60_000): Promise<Result> {
  return new Promise((resolve) => {
    execFile('podman', args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1
      resolve({ code, stdout, stderr })
    })
  })
}

async function podmanOk (args: readonly string[], timeoutMs?: number): Promise<string> {
  const result = await podman(args, timeoutMs)
  if (result.code !== 0) throw new Error(`podman ${args.join(' ')} failed (${result.code}): ${result.stderr}`)
  return result.stdout.trim()
}

function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject).listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0))
    })
  })
}

const containers: string[] = []
const volumes: string[] = []
afterAll(async () => {
  for (const name of containers) await podman(['rm', '--force', '--time', '0', name])
  for (const name of volumes) await podman(['volume', 'rm', '--force', name])
})

function runArgs (port: number, options: { volume?: string, env?: Record<string, string>, extra?: string[] }): string[] {
  const env = Object.entries({ HOST: '127.0.0.1', PORT: String(port), ...options.env }).flatMap(([name, value]) => ['--env', `${name}=${value}`])
  const data = options.volume === undefined ? [] : ['--volume', `${options.volume}:/data`]
  return [...PODMAN_RUN_FLAGS, '--read-only', '--tmpfs', '/tmp:rw,size=16m', ...data, ...env, ...(options.extra ?? [])]
}

interface Container { readonly name: string, readonly baseUrl: string }

/** Starts a container in the background and resolves once /healthz answers 200. */
async function startContainer (volume: string, env: Record<string, string> = {}): Promise<Container> {
  const name = `plantstore-smoke-${randomUUID().slice(0, 8)}`
  const port = await freePort()
  containers.push(name)
  await podmanOk(['run', '--detach', '--name', name, ...runArgs(port, { volume, env }), IMAGE])
  const baseUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    const healthy = await fetch(`${baseUrl}/healthz`).then((response) => response.ok, () => false)
    if (healthy) return { name, baseUrl }
    const state = await podmanOk(['inspect', '--format', '{{.State.Status}}', name])
    if (state === 'exited') throw new Error(`container exited while starting:\n${(await podman(['logs', name])).stderr}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`container did not answer /healthz within 30 s:\n${(await podman(['logs', name])).stderr}`)
}

/** Runs a container in the foreground until it exits, as a failed start does. */
async function runToExit (env: Record<string, string>, extra: string[] = []): Promise<Result> {
  const name = `plantstore-smoke-${randomUUID().slice(0, 8)}`
  containers.push(name)
  return podman(['run', '--name', name, ...runArgs(await freePort(), { env, extra }), IMAGE], 30_000)
}

const asJson = (token: string) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' })

describe(`The container image ${IMAGE}`, () => {
  const volume = `plantstore-smoke-${randomUUID().slice(0, 8)}`
  let first: Container
  let token = ''

  it('starts healthy as uid 1000 on a read-only root, with /data on a volume and /tmp a tmpfs, printing its generated token once', async () => {
    await podmanOk(['volume', 'create', volume])
    volumes.push(volume)
    first = await startContainer(volume)

    const healthcheck = await podman(['healthcheck', 'run', first.name])
    const uid = await podmanOk(['exec', first.name, 'id', '-u'])
    const readOnlyRoot = await podmanOk(['inspect', '--format', '{{.HostConfig.ReadonlyRootfs}}', first.name])
    const writeToApp = await podman(['exec', first.name, 'touch', '/app/written'])
    const tmpFilesystem = await podmanOk(['exec', first.name, 'stat', '--file-system', '--format', '%T', '/tmp'])
    const dataFiles = await podmanOk(['exec', first.name, 'ls', '/data'])
    const logs = await podman(['logs', first.name])
    token = /^ {2}([A-Za-z0-9_-]{43})$/m.exec(logs.stderr)?.[1] ?? ''

    expect(healthcheck.code).toBe(0)
    expect(uid).toBe('1000')
    expect(readOnlyRoot).toBe('true')
    expect(writeToApp.code).not.toBe(0)
    expect(writeToApp.stderr).toContain('Read-only file system')
    expect(tmpFilesystem).toBe('tmpfs')
    expect(dataFiles.split('\n')).toContain('plantstore.db')
    expect(token).toHaveLength(43)
  })

  it(`creates a plant with the token and reads it back exactly, id ${BIG_ID} included`, async () => {
    const created = await fetch(`${first.baseUrl}/plants`, {
      method: 'POST', headers: asJson(token), body: `{"id":${BIG_ID},"name":"Container fern","tag":"smoke"}`
    })
    const read = await fetch(`${first.baseUrl}/plants/${BIG_ID}`, { headers: asJson(token) })

    expect(created.status).toBe(200)
    expect(created.headers.get('location')).toBe(`/plants/${BIG_ID}`)
    expect(await created.text()).toBe('{"name":"Container fern","tag":"smoke"}')
    expect(read.status).toBe(200)
    expect(await read.text()).toBe(`{"id":${BIG_ID},"name":"Container fern","tag":"smoke"}`)
  })

  const acknowledged: number[] = []

  it('stops on SIGTERM (podman stop) with exit code 0 well within the grace period, answering the requests in flight', async () => {
    // Five requests in flight: headers sent, body not yet. They are finished only after the signal.
    const port = Number(new URL(first.baseUrl).port)
    const inFlight = [5001, 5002, 5003, 5004, 5005].map((id) => {
      const body = JSON.stringify({ id, name: `in flight ${id}` })
      const socket = connect(port, '127.0.0.1')
      socket.write(`POST /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`)
      const answer = new Promise<string>((resolve, reject) => {
        let received = ''
        socket.on('data', (chunk) => { received += chunk.toString() })
        socket.on('end', () => resolve(received))
        socket.on('error', reject)
        socket.setTimeout(15_000, () => socket.destroy(new Error('no answer within 15 s')))
      })
      return { id, rest: body.slice(10), socket, answer }
    })
    await new Promise((resolve) => setTimeout(resolve, 300))

    const started = performance.now()
    const stopped = podmanOk(['stop', '--time', '10', first.name], 30_000)
    await expect.poll(async () => (await podman(['logs', first.name])).stdout, { timeout: 5000, interval: 100 })
      .toContain('"msg":"stopping: finishing in-flight requests"')
    for (const request of inFlight) request.socket.write(request.rest)
    const answers = await Promise.all(inFlight.map((request) => request.answer))
    await stopped
    const stopMs = performance.now() - started
    const exitCode = await podmanOk(['inspect', '--format', '{{.State.ExitCode}}', first.name])
    console.log(`SIGTERM: stopped in ${stopMs.toFixed(0)} ms, after answering the ${inFlight.length} requests in flight`)

    expect(exitCode).toBe('0')
    expect(stopMs).toBeLessThan(8000)
    answers.forEach((answer, index) => {
      const [head = '', body] = answer.split('\r\n\r\n')
      expect(head.split('\r\n')[0]).toBe('HTTP/1.1 200 OK')
      expect(head.toLowerCase()).toContain('connection: close')
      expect(body).toBe(`{"name":"in flight ${inFlight[index]?.id}"}`)
      acknowledged.push(inFlight[index]?.id ?? 0)
    })
  })

  it('serves the old plants from a new container on the same volume, where the generated token still works and no new one is printed', async () => {
    const second = await startContainer(volume)

    const old = await fetch(`${second.baseUrl}/plants/${BIG_ID}`, { headers: asJson(token) })
    const page = await fetch(`${second.baseUrl}/plants?after=999&limit=1000`, { headers: asJson(token) })
    const stored = (await page.json() as Array<{ id: number }>).map((plant) => plant.id).filter((id) => id < 1e6)
    const logs = await podman(['logs', second.name])

    expect(old.status).toBe(200)
    expect(await old.text()).toBe(`{"id":${BIG_ID},"name":"Container fern","tag":"smoke"}`)
    expect(stored).toEqual([...acknowledged].sort((a, b) => a - b))
    expect(logs.stderr).not.toContain('generated this access token')
  })

  it('holds no compiler, source tree or build objects, only the driver binary for its platform', async () => {
    const listing = await podmanOk(['run', '--rm', ...PODMAN_RUN_FLAGS, '--entrypoint', 'sh', IMAGE, '-c',
      'for tool in gcc g++ cc make python3; do command -v $tool; done; ls -d /app/src /app/test /app/node_modules/better-sqlite3 2>/dev/null; ' +
      'find /app/node_modules \\( -name obj -o -name obj.target -o -name "*.o" \\) -print; ls /app/node_modules/better-sqlite3-v13/prebuilds'])
    const size = Number(await podmanOk(['image', 'inspect', '--format', '{{.Size}}', IMAGE]))
    console.log(`image ${IMAGE}: ${(size / 1e6).toFixed(0)} MB`)

    expect(listing).toBe('linux-x64.node')
    expect(size).toBeLessThan(420e6)
  })

  it.each([
    ['a /data it cannot write', {}, ['--tmpfs', '/data:rw,mode=0755'],
      'plantstore could not start: DATABASE_URL: cannot use the SQLite database /data/plantstore.db: the folder /data cannot be created or written by this process (uid 1000; EACCES)'],
    ['a bad DATABASE_URL', { DATABASE_URL: 'mysql://db/plants' }, [],
      'plantstore could not start: configuration error: DATABASE_URL must be "memory:", "sqlite:<file path>" or "postgres://user:password@host:port/database"'],
    ['a bad token entry', { PLANTSTORE_TOKENS: 'good-entry,bad entry!' }, [],
      'plantstore could not start: configuration error: PLANTSTORE_TOKENS entry 2 is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)']
  ])('stops at once with exit code 1 and one line naming the problem, given %s', async (_case, env, extra, line) => {
    const started = performance.now()
    const result = await runToExit(env, extra)

    expect(result.code).toBe(1)
    expect(result.stderr.split('\n').filter((text) => text.startsWith('plantstore'))).toEqual([line])
    expect(performance.now() - started).toBeLessThan(15_000)
  })
})
