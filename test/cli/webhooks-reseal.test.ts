import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import Database from '../../src/store/sqlite/driver.js'
import { openSqliteDatabase } from '../../src/store/sqlite/connection.js'
import { temporaryFolder } from '../helpers/app.js'
import { until } from '../helpers/load.js'
import { runCli, type CliRun } from '../helpers/cli-process.js'
import { startServer, spawnServer, type ServerProcess } from '../helpers/server-process.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'

const TOKEN = 'reseal-test-admin-token-4e8b1c'
const KEY_A = randomBytes(32).toString('hex')
const KEY_B = randomBytes(32).toString('base64')
const KEY_C = randomBytes(32).toString('hex')
const SUBSCRIPTION_ID = '5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'
const OTHER_ID = '9c0d7a2e-1b3f-4c5d-8e6f-7a8b9c0d1e2f'
const PLAIN_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw1u3E4ERhSGs='

/** A service's environment: one token with every scope, deliveries to 127.0.0.1 allowed. */
const serviceEnv = (file: string, keys: Record<string, string>) => ({
  DATABASE_URL: `sqlite:${file}`,
  PLANTSTORE_TOKENS: `name=admin;scopes=plants:read+plants:write+admin;${TOKEN}`,
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  ...keys
})

async function reseal (folder: string, file: string, keys: Record<string, string>): Promise<CliRun> {
  return await runCli(['webhooks', 'reseal'], { cwd: folder, env: { DATABASE_URL: `sqlite:${file}`, ...keys } })
}

async function api (server: { baseUrl: string }, method: string, path: string, body?: unknown): Promise<Response> {
  return await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
}

async function stop (server: ServerProcess): Promise<void> {
  process.kill(server.child.pid as number, 'SIGTERM')
  expect(await server.exited).toBe(0)
}

/** The stored secret columns of every subscription, exactly. */
function storedSecrets (file: string): unknown[] {
  const db = new Database(file, { readonly: true })
  try {
    return db.prepare('SELECT id, secret, previous_secret FROM webhook_subscriptions ORDER BY id').all()
  } finally {
    db.close()
  }
}

/**
 * Starts the service, writes one plant and waits for its delivery, verified with the receiver's secret
 * (an earlier event may arrive again first: a stop cuts a delivery under way short, and it is retried).
 */
async function deliversVerified (file: string, keys: Record<string, string>, receiver: WebhookReceiver, plantId: number): Promise<string> {
  const server = await startServer(serviceEnv(file, keys))
  const body = `{"id":${plantId},"name":"Fern ${plantId}"}`
  expect((await api(server, 'POST', '/plants', { id: plantId, name: `Fern ${plantId}` })).status).toBe(200)
  await until(() => receiver.deliveries.some((delivery) => delivery.body === body), 10_000, `the delivery of plant ${plantId}`)
  expect(receiver.deliveries.filter((delivery) => !delivery.verified)).toEqual([])
  await stop(server)
  return server.stderr()
}

describe('rotating WEBHOOK_SECRETS_KEY (SQLite, real processes)', () => {
  it('starts with the new key and the old one in WEBHOOK_SECRETS_PREVIOUS_KEYS, delivers signed with the stored secret, and reseal ' +
    'seals it with the new key so that the old one can go', { timeout: 60_000 }, async () => {
    const folder = temporaryFolder()
    const file = join(folder, 'plants.db')
    const receiver = await WebhookReceiver.start()
    const first = await startServer(serviceEnv(file, { WEBHOOK_SECRETS_KEY: KEY_A }))
    const created = await api(first, 'POST', '/admin/webhooks', { url: receiver.url })
    const { id, secret } = await created.json() as { id: string, secret: string }
    expect(created.status).toBe(201)
    receiver.useSecret(secret)
    await stop(first)
    const sealedWithA = storedSecrets(file)

    const newKeyAlone = spawnServer(serviceEnv(file, { WEBHOOK_SECRETS_KEY: KEY_B }))
    expect(await newKeyAlone.exited).toBe(1)
    expect(newKeyAlone.stderr()).toBe(`plantstore could not start: WEBHOOK_SECRETS_KEY: the signing secret of webhook subscription ${id} ` +
      'cannot be read: WEBHOOK_SECRETS_KEY does not open the secret (a different key sealed it)\n')
    const bothKeys = { WEBHOOK_SECRETS_KEY: KEY_B, WEBHOOK_SECRETS_PREVIOUS_KEYS: `${KEY_C},${KEY_A}` }
    const stderr = await deliversVerified(file, bothKeys, receiver, 1)
    expect(stderr).toContain('plantstore: 1 webhook signing secret(s) are sealed with a key of WEBHOOK_SECRETS_PREVIOUS_KEYS; once every ' +
      'instance runs with the new WEBHOOK_SECRETS_KEY, run plantstore webhooks reseal, then remove the previous keys\n')
    expect(storedSecrets(file)).toEqual(sealedWithA)

    const resealed = await reseal(folder, file, bothKeys)
    const again = await reseal(folder, file, bothKeys)

    expect(resealed).toEqual({
      code: 0,
      signal: null,
      stdout: 'sealed 1 webhook signing secret with WEBHOOK_SECRETS_KEY (1 sealed with a previous key, 0 stored unsealed), 0 already were; ' +
        'dropped 0 expired previous secrets\n',
      stderr: ''
    })
    expect(again.stdout).toBe('sealed 0 webhook signing secrets with WEBHOOK_SECRETS_KEY (0 sealed with a previous key, 0 stored unsealed), ' +
      '1 already were; dropped 0 expired previous secrets\n')
    expect(storedSecrets(file)).toEqual([{ id, secret: expect.stringMatching(/^sealed:v1:/), previous_secret: null }])
    expect(storedSecrets(file)).not.toEqual(sealedWithA)
    expect(await deliversVerified(file, { WEBHOOK_SECRETS_KEY: KEY_B }, receiver, 2)).not.toContain('webhook signing secret')
  })

  it('seals with the new key the secrets stored before any key was set and the previous secret of a rotation still in its grace ' +
    'period, and drops a previous secret whose grace period is over', async () => {
    const folder = temporaryFolder()
    const file = join(folder, 'plants.db')
    const db = openSqliteDatabase(file)
    db.prepare('INSERT INTO webhook_subscriptions (id, url, events, secret, created_at, previous_secret, previous_secret_until) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(SUBSCRIPTION_ID, 'https://example.com/hooks', 'plant.created', PLAIN_SECRET, Date.now(), 'whsec_AAAA', Date.now() + 3600_000)
    db.prepare('INSERT INTO webhook_subscriptions (id, url, events, secret, created_at, previous_secret, previous_secret_until) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(OTHER_ID, 'https://example.com/other', 'plant.created', PLAIN_SECRET, Date.now(), 'sealed:v1:c29tZSBvdGhlciBrZXk=', Date.now() - 1)
    db.close()

    const run = await reseal(folder, file, { WEBHOOK_SECRETS_KEY: KEY_A })

    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' })
    expect(run.stdout).toBe('sealed 3 webhook signing secrets with WEBHOOK_SECRETS_KEY (0 sealed with a previous key, 3 stored unsealed), ' +
      '0 already were; dropped 1 expired previous secret\n')
    expect(storedSecrets(file)).toEqual([
      { id: SUBSCRIPTION_ID, secret: expect.stringMatching(/^sealed:v1:/), previous_secret: expect.stringMatching(/^sealed:v1:/) },
      { id: OTHER_ID, secret: expect.stringMatching(/^sealed:v1:/), previous_secret: null }
    ])
  })

  it('refuses with one line and changes nothing without WEBHOOK_SECRETS_KEY, with a key that opens no secret, or on a memory store; ' +
    'a service started without the key refuses the sealed secrets', async () => {
    const folder = temporaryFolder()
    const file = join(folder, 'plants.db')
    const server = await startServer(serviceEnv(file, { WEBHOOK_SECRETS_KEY: KEY_A }))
    expect((await api(server, 'POST', '/admin/webhooks', { url: 'http://127.0.0.1:9/hooks' })).status).toBe(201)
    await stop(server)
    const before = storedSecrets(file)
    const { id } = (before as Array<{ id: string }>)[0]!

    const runs = {
      noKey: await reseal(folder, file, {}),
      wrongKey: await reseal(folder, file, { WEBHOOK_SECRETS_KEY: KEY_B, WEBHOOK_SECRETS_PREVIOUS_KEYS: KEY_C }),
      previousWithoutKey: await reseal(folder, file, { WEBHOOK_SECRETS_PREVIOUS_KEYS: KEY_A }),
      memory: await runCli(['webhooks', 'reseal'], { cwd: folder, env: { DATABASE_URL: 'memory:', WEBHOOK_SECRETS_KEY: KEY_A } }),
      extra: await runCli(['webhooks', 'reseal', '--all'], { cwd: folder, env: {} })
    }

    expect(Object.fromEntries(Object.entries(runs).map(([name, run]) => [name, { code: run.code, stdout: run.stdout, stderr: run.stderr }]))).toEqual({
      noKey: {
        code: 1,
        stdout: '',
        stderr: 'plantstore: WEBHOOK_SECRETS_KEY is not set: webhooks reseal seals the stored signing secrets with it (with ' +
          'WEBHOOK_SECRETS_PREVIOUS_KEYS naming the keys that sealed them); storing them unsealed again is not supported\n'
      },
      wrongKey: {
        code: 1,
        stdout: '',
        stderr: `plantstore: the signing secret of webhook subscription ${id} cannot be read: neither WEBHOOK_SECRETS_KEY nor ` +
          'WEBHOOK_SECRETS_PREVIOUS_KEYS opens the secret (a different key sealed it)\n'
      },
      previousWithoutKey: {
        code: 1,
        stdout: '',
        stderr: 'plantstore: configuration error: WEBHOOK_SECRETS_PREVIOUS_KEYS needs WEBHOOK_SECRETS_KEY: secrets are sealed with the ' +
          'current key, and going back to no key is not supported\n'
      },
      memory: {
        code: 1,
        stdout: '',
        stderr: 'plantstore: DATABASE_URL is "memory:": the signing secrets of a memory store live only inside the running service, sealed with its key\n'
      },
      extra: { code: 2, stdout: '', stderr: 'plantstore: unknown option "--all" for "webhooks reseal" (see "plantstore webhooks reseal --help")\n' }
    })
    expect(storedSecrets(file)).toEqual(before)
    const keyTakenAway = spawnServer(serviceEnv(file, {}))
    expect(await keyTakenAway.exited).toBe(1)
    expect(keyTakenAway.stderr()).toBe(`plantstore could not start: WEBHOOK_SECRETS_KEY: the signing secret of webhook subscription ${id} ` +
      'cannot be read: the secret is sealed and WEBHOOK_SECRETS_KEY is not set\n')
  })
})
