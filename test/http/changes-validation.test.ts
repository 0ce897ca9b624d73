/**
 * What the change routes refuse, and in which order: no token (401), a token without `plants:read` (403),
 * then a malformed `after`, `limit`, `type`, `tag`, `Last-Event-ID` or plant id (400), each before the
 * store is asked anything, so before a 410. Validation is the same code on every backend: these run on
 * the memory store.
 */
import { describe, expect, it } from 'vitest'
import { buildTestApp, expectError, memoryBackend, postPlant, sharedTestApp, TEST_TOKEN } from '../helpers/app.js'
import { read, untilPast } from '../helpers/changes.js'

const ADMIN_TOKEN = 'changes-validation-admin-5e2d'
const WRITER_TOKEN = 'changes-validation-writer-0c81'
const TOKENS = [TEST_TOKEN, `name=ops;scopes=admin;${ADMIN_TOKEN}`, `name=loader;scopes=plants:write;${WRITER_TOKEN}`]

const AFTER_RULE = 'query parameter after must be a canonical decimal integer from 0 to 9223372036854775807'
const LIMIT_RULE = 'query parameter limit must be a canonical decimal integer from 1 to 1000'
const TYPE_RULE = 'query parameter type must be a comma-separated list of plant.created, plant.updated, plant.deleted, each at most once'
const ID_RULE = 'path parameter id must be a canonical decimal integer from -9223372036854775808 to 9223372036854775807'
const LAST_EVENT_ID_RULE = 'header last-event-id must be a canonical decimal integer from 0 to 9223372036854775807'
const LACKS_READ = 'this token lacks the scope "plants:read", which this operation needs'
const READ_CHALLENGE = 'Bearer realm="plantstore", error="insufficient_scope", scope="plants:read"'
const EVENT_STREAM = { accept: 'text/event-stream' }

describe('The change routes refuse bad input with a 400 naming it', () => {
  const shared = sharedTestApp(memoryBackend, { tokens: TOKENS })

  it.each([
    ['-1', AFTER_RULE],
    ['01', AFTER_RULE],
    ['1.0', AFTER_RULE],
    ['1e2', AFTER_RULE],
    ['%2B5', AFTER_RULE],
    ['9223372036854775808', AFTER_RULE],
    ['abc', AFTER_RULE],
    ['', 'query parameter after is empty; give a canonical decimal integer from 0 to 9223372036854775807, or leave it out']
  ])('GET /plants/changes?after=%s: %s', async (after, message) => {
    expectError(await read(shared(), `/plants/changes?after=${after}`), 400, message)
  })

  it.each([
    ['0', LIMIT_RULE],
    ['1001', LIMIT_RULE],
    ['-1', LIMIT_RULE],
    ['10.5', LIMIT_RULE],
    ['', 'query parameter limit is empty; give a canonical decimal integer from 1 to 1000, or leave it out']
  ])('GET /plants/changes?limit=%s: %s', async (limit, message) => {
    expectError(await read(shared(), `/plants/changes?limit=${limit}`), 400, message)
  })

  it.each([
    'x',
    '',
    'plant.created,plant.created',
    'plant.created,',
    ',plant.created',
    'Plant.created',
    'plant.created%20',
    'plant.created;plant.deleted',
    'plant.created,plant.updated,plant.deleted,plant.created'
  ])('GET /plants/changes?type=%s: the rule for type', async (type) => {
    expectError(await read(shared(), `/plants/changes?type=${type}`), 400, TYPE_RULE)
  })

  it.each([
    ['x'.repeat(257), 'query parameter tag must be at most 256 characters long'],
    ['%00', 'query parameter tag must not contain U+0000 or unpaired surrogates'],
    ['%ED%A0%80', 'query parameter tag is not valid percent-encoded UTF-8']
  ])('GET /plants/changes?tag=%s: %s', async (tag, message) => {
    expectError(await read(shared(), `/plants/changes?tag=${tag}`), 400, message)
  })

  it('accepts a tag of 256 characters, and the greatest after', async () => {
    expect((await read(shared(), `/plants/changes?tag=${'x'.repeat(256)}&after=9223372036854775807&limit=1000`)).statusCode).toBe(200)
  })

  it('refuses a parameter given twice', async () => {
    expectError(await read(shared(), '/plants/changes?after=1&after=2'), 400, 'query parameter after is given more than once; give it once')
  })

  it.each(['x', '01', '-1', '1.0', '9223372036854775808'])('refuses Last-Event-ID: %s with a 400 before any stream opens', async (lastEventId) => {
    const response = await read(shared(), '/plants/changes', { ...EVENT_STREAM, 'last-event-id': lastEventId })

    expectError(response, 400, LAST_EVENT_ID_RULE)
  })

  it.each(['007', '-0', '1.5', '+5', '9223372036854775808', '-9223372036854775809', 'abc'])('GET /plants/%s/history: the rule for the id', async (id) => {
    expectError(await read(shared(), `/plants/${id}/history`), 400, ID_RULE)
  })

  it.each([
    ['after=-1', AFTER_RULE],
    ['after=01', AFTER_RULE],
    ['limit=0', LIMIT_RULE],
    ['limit=1001', LIMIT_RULE]
  ])('GET /plants/1/history?%s: %s', async (query, message) => {
    expectError(await read(shared(), `/plants/1/history?${query}`), 400, message)
  })
})

describe('The change routes check the token first, then its scope', () => {
  const shared = sharedTestApp(memoryBackend, { tokens: TOKENS })

  it.each([
    ['/plants/changes'],
    ['/plants/changes?after=01&type=x'],
    ['/plants/changes/head'],
    ['/plants/1/history?limit=0'],
    ['/plants/007/history']
  ])('GET %s: 401 without a token, and with an unknown one', async (url) => {
    const none = await shared().inject({ method: 'GET', url })
    const unknown = await read(shared(), url, { authorization: 'Bearer not-a-known-token' })

    expectError(none, 401, 'this operation needs an "Authorization: Bearer <token>" header')
    expect(none.headers['www-authenticate']).toBe('Bearer realm="plantstore"')
    expectError(unknown, 401, 'the bearer token is missing, malformed or not accepted')
    expect(unknown.headers['www-authenticate']).toBe('Bearer realm="plantstore", error="invalid_token"')
  })

  it.each([
    ['an admin token', ADMIN_TOKEN, '/plants/changes', {}],
    ['an admin token', ADMIN_TOKEN, '/plants/changes?after=01&type=x', {}],
    ['an admin token', ADMIN_TOKEN, '/plants/changes', EVENT_STREAM],
    ['an admin token', ADMIN_TOKEN, '/plants/changes/head', {}],
    ['an admin token', ADMIN_TOKEN, '/plants/1/history', {}],
    ['a token that only writes', WRITER_TOKEN, '/plants/changes', {}],
    ['a token that only writes', WRITER_TOKEN, '/plants/changes', { ...EVENT_STREAM, 'last-event-id': 'x' }],
    ['a token that only writes', WRITER_TOKEN, '/plants/007/history', {}]
  ])('with %s, GET %s is a 403 naming plants:read', async (_token, token, url, headers) => {
    const response = await read(shared(), url, { authorization: `Bearer ${token}`, ...headers })

    expectError(response, 403, LACKS_READ)
    expect(response.headers['www-authenticate']).toBe(READ_CHALLENGE)
  })
})

describe('Bad input is refused before the store is asked', () => {
  it('answers 400, not 410, for a malformed query whose resume point is past the retention', async () => {
    const app = await buildTestApp({ config: { changes: { retentionMs: 50, streamsMax: 1000 } } })
    expect((await postPlant(app, { id: 1, name: 'Fern' })).statusCode).toBe(200)
    await untilPast(Date.now(), 50)

    expect((await read(app, '/plants/changes?after=0')).statusCode).toBe(410)
    expectError(await read(app, '/plants/changes?after=0&limit=0'), 400, LIMIT_RULE)
    expectError(await read(app, '/plants/changes?after=0&type=plant.created,'), 400, TYPE_RULE)
    expectError(await read(app, '/plants/changes', { ...EVENT_STREAM, 'last-event-id': '00' }), 400, LAST_EVENT_ID_RULE)
  })
})
