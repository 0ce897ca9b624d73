import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'

/**
 * Tokens made, revoked and expiring at run time, through real server processes and sockets (docs/reference/api/authentication.md:
 * a change takes effect on the instance that answers before it answers, and on every
 * other instance sharing the store within 2 seconds). The measured delays are printed for the record.
 */

const PROPAGATION_LIMIT_MS = 2000
const POLL_EVERY_MS = 20
const LISTENER_APPLICATION = 'plantstore-token-listener'

const INVALID_TOKEN_BODY = '{"error":401,"message":"the bearer token is missing, malformed or not accepted"}'
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token"'

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

async function call (baseUrl: string, token: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(5000)
  })
  return { status: response.status, headers: response.headers, text: await response.text() }
}

const listPlants = (baseUrl: string, token: string) => call(baseUrl, token, 'GET', '/plants')

function expectInvalidToken (answer: Answer): void {
  expect({
    status: answer.status,
    text: answer.text,
    challenge: answer.headers.get('www-authenticate'),
    type: answer.headers.get('content-type')
  }).toEqual({ status: 401, text: INVALID_TOKEN_BODY, challenge: INVALID_TOKEN_CHALLENGE, type: 'application/json; charset=utf-8' })
}

function expectAccepted (answer: Answer): void {
  expect({ status: answer.status, type: answer.headers.get('content-type') })
    .toEqual({ status: 200, type: 'application/json; charset=utf-8' })
}

interface CreatedToken {
  readonly id: string
  readonly name: string
  readonly scopes: string[]
  readonly createdAt: string
  readonly expiresAt?: string
  readonly token: string
}

/** POST /admin/tokens, asserting the 201 and its exact shape. */
async function createToken (baseUrl: string, adminToken: string, request: { name: string, scopes: string[], expiresAt?: string }): Promise<CreatedToken> {
  const answer = await call(baseUrl, adminToken, 'POST', '/admin/tokens', request)
  expect({ status: answer.status, cacheControl: answer.headers.get('cache-control') }, answer.text).toEqual({ status: 201, cacheControl: 'no-store' })
  const created = JSON.parse(answer.text) as CreatedToken
  expect(created).toEqual({
    id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
    name: request.name,
    scopes: request.scopes,
    createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    ...(request.expiresAt === undefined ? {} : { expiresAt: request.expiresAt }),
    token: expect.stringMatching(/^pst_[A-Za-z0-9_-]{43}$/)
  })
  expect(answer.headers.get('location')).toBe(`/admin/tokens/${created.id}`)
  return created
}

async function revokeToken (baseUrl: string, adminToken: string, id: string): Promise<void> {
  const answer = await call(baseUrl, adminToken, 'DELETE', `/admin/tokens/${id}`)
  expect({ status: answer.status, text: answer.text }).toEqual({ status: 204, text: '' })
}

/**
 * Asks `probe` every 20 ms until `settled` holds, for at most `limitMs` after `since`; resolves with
 * the milliseconds from `since` to the answer that settled it, and every answer before it.
 */
async function timeUntil (
  since: number, probe: () => Promise<Answer>, settled: (answer: Answer) => boolean, limitMs = PROPAGATION_LIMIT_MS
): Promise<{ elapsedMs: number, answer: Answer, before: Answer[] }> {
  const before: Answer[] = []
  for (;;) {
    const answer = await probe()
    const elapsedMs = performance.now() - since
    if (settled(answer)) return { elapsedMs, answer, before }
    before.push(answer)
    if (elapsedMs > limitMs) {
      throw new Error(`not settled within ${limitMs} ms; last answer ${answer.status} ${answer.text}`)
    }
    await sleep(POLL_EVERY_MS)
  }
}

function summary (label: string, delays: readonly number[]): string {
  const sorted = [...delays].sort((a, b) => a - b)
  const median = sorted.length % 2 === 1
    ? sorted[(sorted.length - 1) / 2] as number
    : ((sorted[sorted.length / 2 - 1] as number) + (sorted[sorted.length / 2] as number)) / 2
  const ms = (value: number) => value.toFixed(1)
  const line = `${label}: n=${sorted.length} min=${ms(sorted[0] as number)} ms median=${ms(median)} ms ` +
    `max=${ms(sorted[sorted.length - 1] as number)} ms [${delays.map(ms).join(', ')}]`
  console.log(line)
  return line
}

const adminEntry = (token: string) => `name=ops;scopes=admin+plants:read+plants:write;${token}`

/** Two instances on one fresh PostgreSQL database, each configured with the same admin token. */
async function twoInstances (adminToken: string) {
  const databaseUrl = await createTestDatabase()
  // Polling with a revoked token until it is refused makes 401s by the hundred from one address: the
  // failed-authentication limit would answer 429 to them after its 100 a minute.
  const env = { DATABASE_URL: databaseUrl, PLANTSTORE_TOKENS: adminEntry(adminToken), DATABASE_POOL_SIZE: '3', AUTH_FAILURE_LIMIT_PER_MINUTE: '0' }
  const [a, b] = await Promise.all([startServer(env), startServer(env)])
  return { databaseUrl, a, b }
}

async function withDatabase<T> (databaseUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

const listenerConnections = (client: pg.Client) => client.query<{ count: number }>(
  'SELECT count(*)::int AS count FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()',
  [LISTENER_APPLICATION]).then(({ rows }) => rows[0]?.count)

/**
 * Creates and revokes `rounds` tokens through A (each change after `pauseMs(round)`), each time asserting
 * A's answers right after the 201 and the 204, and measuring how long B takes, from the moment A's answer
 * arrived, to accept and then to refuse the token.
 */
async function propagationRounds (
  a: { baseUrl: string }, b: { baseUrl: string }, adminToken: string, rounds: number, prefix: string, pauseMs: (round: number) => number = () => 0
) {
  const accepted: number[] = []
  const refused: number[] = []
  for (let round = 1; round <= rounds; round++) {
    await sleep(pauseMs(round))
    const created = await createToken(a.baseUrl, adminToken, { name: `${prefix}-${round}`, scopes: ['plants:read'] })
    const createdAt = performance.now()
    expectAccepted(await listPlants(a.baseUrl, created.token))
    const acceptance = await timeUntil(createdAt, () => listPlants(b.baseUrl, created.token), (answer) => answer.status === 200)
    for (const answer of acceptance.before) expectInvalidToken(answer)
    accepted.push(acceptance.elapsedMs)

    await sleep(pauseMs(round))
    await revokeToken(a.baseUrl, adminToken, created.id)
    const revokedAt = performance.now()
    expectInvalidToken(await listPlants(a.baseUrl, created.token))
    const refusal = await timeUntil(revokedAt, () => listPlants(b.baseUrl, created.token), (answer) => answer.status !== 200)
    for (const answer of refusal.before) expectAccepted(answer)
    expectInvalidToken(refusal.answer)
    refused.push(refusal.elapsedMs)
    // Once refused, refused on both for good.
    for (const instance of [a, b]) expectInvalidToken(await listPlants(instance.baseUrl, created.token))
  }
  for (const delay of [...accepted, ...refused]) expect(delay).toBeLessThan(PROPAGATION_LIMIT_MS)
  return { accepted, refused }
}

/** Reads one HTTP/1.1 response from a raw socket: resolves once its Content-Length body is in, or the socket closes. */
function readResponse (socket: Socket, label: string, timeoutMs = 5000): Promise<{ status: number, headers: Record<string, string>, body: string }> {
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0)
    const timer = setTimeout(() => { finish(new Error(`${label}: no complete response within ${timeoutMs} ms: ${received.toString()}`)) }, timeoutMs)
    const parse = () => {
      const text = received.toString('latin1')
      const headEnd = text.indexOf('\r\n\r\n')
      if (headEnd === -1) return undefined
      const [statusLine = '', ...headerLines] = text.slice(0, headEnd).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of headerLines) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      const body = received.subarray(Buffer.byteLength(text.slice(0, headEnd + 4), 'latin1'))
      const length = Number(headers['content-length'] ?? Number.NaN)
      if (!(body.length >= length)) return undefined
      return { status: Number(statusLine.split(' ')[1]), headers, body: body.subarray(0, length).toString('utf8') }
    }
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      const response = parse()
      if (response !== undefined) finish(undefined, response)
    }
    const onClose = (error?: unknown) => {
      finish(new Error(`${label}: the connection closed before a complete response (${String(error ?? 'no error')}): ${JSON.stringify(received.toString())}`))
    }
    function finish (error?: Error, response?: ReturnType<typeof parse>) {
      clearTimeout(timer)
      socket.off('data', onData)
      socket.off('close', onClose)
      socket.off('error', onClose)
      if (response !== undefined) resolve(response)
      else reject(error)
    }
    socket.on('data', onData)
    socket.once('close', onClose)
    socket.once('error', onClose)
  })
}

async function openSocket (baseUrl: string): Promise<Socket> {
  const { hostname, port } = new URL(baseUrl)
  const socket = connect({ host: hostname, port: Number(port) })
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  return socket
}

const postHead = (baseUrl: string, token: string, body: string) => [
  'POST /plants HTTP/1.1',
  `Host: ${new URL(baseUrl).host}`,
  `Authorization: Bearer ${token}`,
  'Content-Type: application/json',
  `Content-Length: ${Buffer.byteLength(body)}`,
  'Connection: close',
  '',
  ''
].join('\r\n')

describe('Tokens made and revoked at run time, across processes', () => {
  it('two instances on one PostgreSQL: a token made on A is accepted by B, and revoked on A is refused by A at once and by B within 2 s (LISTEN/NOTIFY)', async () => {
    const adminToken = 'revocation-admin-token-listen-7c1e'
    const { databaseUrl, a, b } = await twoInstances(adminToken)
    // Both instances hold their LISTEN connection.
    await withDatabase(databaseUrl, async (client) => {
      await expect.poll(() => listenerConnections(client), { timeout: 5000, interval: 50 }).toBe(2)
    })

    const { accepted, refused } = await propagationRounds(a, b, adminToken, 5, 'listen-reader')

    for (const instance of [a, b]) expect(instance.stderr()).toBe('')
    summary('LISTEN path: create on A -> B accepts', accepted)
    summary('LISTEN path: revoke on A -> B refuses', refused)
  }, 30_000)

  it('with the LISTEN connections gone and kept out, B still follows A within 2 s through the 1 s revision poll', async () => {
    const adminToken = 'revocation-admin-token-poll-3b9d'
    const { databaseUrl, a, b } = await twoInstances(adminToken)
    await withDatabase(databaseUrl, async (client) => {
      await expect.poll(() => listenerConnections(client), { timeout: 5000, interval: 50 }).toBe(2)
      // A login event trigger (PostgreSQL 17+) turns the listener's reconnections away, so the notifications
      // cannot help, nor can the refresh a reconnected listener makes; the pools' connections still log in.
      await client.query(`CREATE FUNCTION refuse_token_listener () RETURNS event_trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF current_setting('application_name') = '${LISTENER_APPLICATION}' THEN
            RAISE EXCEPTION 'the token listener is kept out by the test';
          END IF;
        END $$`)
      await client.query('CREATE EVENT TRIGGER refuse_token_listener ON login EXECUTE FUNCTION refuse_token_listener()')
      const { rows } = await client.query<{ terminated: boolean }>(
        'SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()',
        [LISTENER_APPLICATION])
      expect(rows.map((row) => row.terminated)).toEqual([true, true])
      // Past the listener's 1 s retry: the retries were turned away too.
      await sleep(1500)
      expect(await listenerConnections(client)).toBe(0)
    })

    // Each change is made right after B's poll caught up with the last one, so it would always land just
    // after a tick (the slowest case); the pauses move it across the poll's period instead.
    const { accepted, refused } = await propagationRounds(a, b, adminToken, 5, 'poll-reader', (round) => (round - 1) * 190)

    await withDatabase(databaseUrl, async (client) => {
      // Still no listener: every delay above came from the poll.
      expect(await listenerConnections(client)).toBe(0)
      await client.query('DROP EVENT TRIGGER refuse_token_listener')
    })
    // Losing the listener is no error: nothing on stderr, no failed token read logged.
    for (const instance of [a, b]) {
      expect(instance.stderr()).toBe('')
      expect(instance.stdout()).not.toContain('could not read the access tokens')
    }
    summary('poll only: create on A -> B accepts', accepted)
    summary('poll only: revoke on A -> B refuses', refused)
  }, 40_000)

  it('lets a request already authenticated finish after its token is revoked, and refuses the next ones', async () => {
    const adminToken = 'revocation-admin-token-inflight-52aa'
    const server = await startServer({
      DATABASE_URL: `sqlite:${join(temporaryFolder(), 'in-flight.db')}`,
      PLANTSTORE_TOKENS: adminEntry(adminToken)
    })
    const writer = await createToken(server.baseUrl, adminToken, { name: 'in-flight-writer', scopes: ['plants:read', 'plants:write'] })
    const body = '{"id":4242,"name":"in-flight fern","tag":"revoked-mid-request"}'
    const half = Math.floor(body.length / 2)

    // Headers and half the body: the token is checked in onRequest, which does not wait for the body.
    const inFlight = await openSocket(server.baseUrl)
    const inFlightResponse = readResponse(inFlight, 'in-flight request', 10_000)
    inFlight.write(postHead(server.baseUrl, writer.token, body) + body.slice(0, half))
    await sleep(300)

    await revokeToken(server.baseUrl, adminToken, writer.id)
    expectInvalidToken(await listPlants(server.baseUrl, writer.token))

    // A new request with the revoked token is refused on its headers alone, before its body is complete.
    const late = await openSocket(server.baseUrl)
    const lateResponse = readResponse(late, 'request after the revocation')
    late.write(postHead(server.baseUrl, writer.token, '{"id":4243,"name":"too late"}') + '{"id":4243,')
    const refused = await lateResponse
    late.destroy()
    expect({ status: refused.status, body: refused.body, challenge: refused.headers['www-authenticate'] })
      .toEqual({ status: 401, body: INVALID_TOKEN_BODY, challenge: INVALID_TOKEN_CHALLENGE })

    // The request under way completes and its plant is stored.
    // write, not end: a half-close would make Node's HTTP server abort the request (httpAllowHalfOpen is off).
    inFlight.write(body.slice(half))
    const completed = await inFlightResponse
    inFlight.destroy()
    expect({ status: completed.status, body: completed.body, location: completed.headers.location })
      .toEqual({ status: 200, body: '{"name":"in-flight fern","tag":"revoked-mid-request"}', location: '/plants/4242' })
    const stored = await call(server.baseUrl, adminToken, 'GET', '/plants/4242')
    expect({ status: stored.status, text: stored.text })
      .toEqual({ status: 200, text: '{"id":4242,"name":"in-flight fern","tag":"revoked-mid-request"}' })

    // Later requests with the token are refused, and stored nothing.
    expectInvalidToken(await call(server.baseUrl, writer.token, 'POST', '/plants', { id: 4244, name: 'refused' }))
    expectInvalidToken(await call(server.baseUrl, writer.token, 'GET', '/plants/4242'))
    const absent = await call(server.baseUrl, adminToken, 'GET', '/plants?limit=10')
    expect({ status: absent.status, text: absent.text })
      .toEqual({ status: 200, text: '[{"id":4242,"name":"in-flight fern","tag":"revoked-mid-request"}]' })
  })

  it('refuses an expired token on both instances from its expiry on, and frees its name then, not before', async () => {
    const adminToken = 'revocation-admin-token-expiry-e40f'
    const { a, b } = await twoInstances(adminToken)
    const expiresAtMs = Date.now() + 2500
    const expiresAt = new Date(expiresAtMs).toISOString()
    const shortLived = await createToken(a.baseUrl, adminToken, { name: 'short-lived', scopes: ['plants:read'], expiresAt })
    const createdAt = performance.now()

    expectAccepted(await listPlants(a.baseUrl, shortLived.token))
    const acceptance = await timeUntil(createdAt, () => listPlants(b.baseUrl, shortLived.token), (answer) => answer.status === 200)
    for (const answer of acceptance.before) expectInvalidToken(answer)
    expect(Date.now()).toBeLessThan(expiresAtMs)

    // While it lives, its name is taken on either instance.
    for (const instance of [a, b]) {
      const clash = await call(instance.baseUrl, adminToken, 'POST', '/admin/tokens', { name: 'short-lived', scopes: ['plants:read'] })
      expect({ status: clash.status, text: clash.text }).toEqual({
        status: 409,
        text: '{"error":409,"message":"a live access token is already named \\"short-lived\\"; revoke it or choose another name"}'
      })
    }

    // Accepted until its expiry, refused from then on, by each instance on its own clock (both watched at once).
    const expiries = await Promise.all([a, b].map(async (instance) => {
      const expiry = await timeUntil(performance.now(), () => listPlants(instance.baseUrl, shortLived.token),
        (answer) => answer.status !== 200, expiresAtMs - Date.now() + 1000)
      return { ...expiry, refusedAtMs: Date.now() }
    }))
    for (const expiry of expiries) {
      expect(expiry.before.length).toBeGreaterThan(0)
      for (const answer of expiry.before) expectAccepted(answer)
      expectInvalidToken(expiry.answer)
      expect(expiry.refusedAtMs).toBeGreaterThanOrEqual(expiresAtMs)
      expect(expiry.refusedAtMs).toBeLessThan(expiresAtMs + 500)
    }
    for (const instance of [a, b]) expectInvalidToken(await listPlants(instance.baseUrl, shortLived.token))

    // The name is free again: a new token takes it (made on B this time), and works on both.
    const successor = await createToken(b.baseUrl, adminToken, { name: 'short-lived', scopes: ['plants:read'] })
    const successorAt = performance.now()
    expectAccepted(await listPlants(b.baseUrl, successor.token))
    const successorAcceptance = await timeUntil(successorAt, () => listPlants(a.baseUrl, successor.token), (answer) => answer.status === 200)
    for (const answer of successorAcceptance.before) expectInvalidToken(answer)
    for (const instance of [a, b]) expectInvalidToken(await listPlants(instance.baseUrl, shortLived.token))

    // Both are listed, the newer first; the expired one keeps its expiry and was never revoked.
    const listed = await call(a.baseUrl, adminToken, 'GET', '/admin/tokens')
    expect(listed.status).toBe(200)
    const named = (JSON.parse(listed.text) as Array<Record<string, unknown>>).filter((token) => token.name === 'short-lived')
    expect(named).toEqual([
      { id: successor.id, name: 'short-lived', scopes: ['plants:read'], source: 'store', createdAt: successor.createdAt },
      { id: shortLived.id, name: 'short-lived', scopes: ['plants:read'], source: 'store', createdAt: shortLived.createdAt, expiresAt }
    ])
    summary('expiry test: create on A -> B accepts', [acceptance.elapsedMs])
    summary('expiry test: first refusal after expiresAt (A, B)', expiries.map((expiry) => expiry.refusedAtMs - expiresAtMs))
    summary('expiry test: create on B -> A accepts', [successorAcceptance.elapsedMs])
  }, 30_000)

  it('counts the rate limit per token: two tokens each get their own 3 requests, then 429 with Retry-After', async () => {
    const adminToken = 'revocation-admin-token-ratelimit-9d02'
    const server = await startServer({ DATABASE_URL: 'memory:', PLANTSTORE_TOKENS: adminEntry(adminToken), RATE_LIMIT_PER_MINUTE: '3' })
    const first = await createToken(server.baseUrl, adminToken, { name: 'limited-one', scopes: ['plants:read'] })
    const second = await createToken(server.baseUrl, adminToken, { name: 'limited-two', scopes: ['plants:read'] })

    for (const token of [first.token, second.token]) {
      for (let request = 1; request <= 3; request++) {
        const answer = await listPlants(server.baseUrl, token)
        expect({ status: answer.status, text: answer.text }).toEqual({ status: 200, text: '[]' })
      }
    }
    for (const token of [first.token, second.token]) {
      const limited = await listPlants(server.baseUrl, token)
      const retryAfter = limited.headers.get('retry-after') ?? ''
      expect(retryAfter).toMatch(/^\d+$/)
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1)
      expect(Number(retryAfter)).toBeLessThanOrEqual(60)
      expect({ status: limited.status, text: limited.text, type: limited.headers.get('content-type') }).toEqual({
        status: 429,
        text: `{"error":429,"message":"too many requests for this token, retry in ${retryAfter} s"}`,
        type: 'application/json; charset=utf-8'
      })
    }
    // Another token's count, and /admin's count apart from /plants: the admin token made two tokens under
    // /admin, and still has its 3 requests on /plants, and one more under /admin.
    for (let request = 1; request <= 3; request++) expect((await listPlants(server.baseUrl, adminToken)).status).toBe(200)
    expect((await listPlants(server.baseUrl, adminToken)).status).toBe(429)
    expect((await call(server.baseUrl, adminToken, 'GET', '/admin/tokens')).status).toBe(200)
    expect((await call(server.baseUrl, adminToken, 'GET', '/admin/tokens')).status).toBe(429)
  })
})
