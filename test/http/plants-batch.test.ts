/**
 * `POST /plants/batch` on every backend: a mixed batch and its results, each refusal with nothing applied
 * (every other plant read back unchanged), operations that see the earlier ones, preconditions, replays
 * that record nothing, webhook events per write in order, the body limit, batches and single writes on
 * the same ids from several clients (no reader sees part of a batch), and the log line and metrics.
 */
import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { entityTagOf } from '../../src/http/entity-tags.js'
import { plantJson } from '../../src/store/plant-document.js'
import type { WritePlan } from '../../src/store/write-operations.js'
import { backends, bearer, buildTestApp, expectError, postPlant, TEST_TOKEN } from '../helpers/app.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { subscribe, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'

const batch = (app: FastifyInstance, operations: unknown, headers: Record<string, string> = {}) => app.inject({
  method: 'POST',
  url: '/plants/batch',
  headers: { ...bearer(), 'content-type': 'application/json', ...headers },
  payload: typeof operations === 'string' ? operations : JSON.stringify({ operations })
})

const etagOf = (id: number, name: string, tag?: string) => entityTagOf(plantJson(BigInt(id), name, tag))

/** Every plant of the store, as one page of its listing: what a refused batch must leave as it was. */
async function everyPlant (app: FastifyInstance): Promise<string> {
  const response = await app.inject({ method: 'GET', url: '/plants?limit=1000', headers: bearer() })
  expect(response.statusCode).toBe(200)
  return response.body
}

/** Five plants the refusals run against. */
async function seed (app: FastifyInstance): Promise<void> {
  for (const plant of [{ id: 1, name: 'Fern', tag: 'shade' }, { id: 2, name: 'Moss' }, { id: 3, name: 'Ivy', tag: 'wall' }, { id: 4, name: 'Rose' }, { id: 5, name: 'Sage' }]) {
    expect((await postPlant(app, plant)).statusCode).toBe(200)
  }
}

describe.each(backends)('POST /plants/batch on $name', (backend) => {
  const build = async (config = {}) => buildTestApp({ store: await backend.open(), config })

  it('applies a mixed batch in order and answers each operation as its single request would', async () => {
    const app = await build()
    await seed(app)

    // The body as text, for an id above 2^53 that JSON.stringify would round.
    const response = await batch(app, JSON.stringify({
      operations: [
        { method: 'POST', body: { id: 'EXACT_ID', name: 'Exact' } },
        { method: 'PUT', id: 20, body: { name: 'Oak', tag: 'tree' }, ifNoneMatch: '*' },
        { method: 'PUT', id: 2, body: { id: 2, name: 'Moss', tag: 'shade' } },
        { method: 'PATCH', id: 1, body: { tag: null }, ifMatch: etagOf(1, 'Fern', 'shade') },
        { method: 'DELETE', id: 4 },
        { method: 'POST', body: { id: 3, name: 'Ivy', tag: 'wall' } },
        { method: 'PATCH', id: 20, body: { name: 'Old oak' }, ifMatch: etagOf(20, 'Oak', 'tree') },
        { method: 'DELETE', id: 20, ifMatch: etagOf(20, 'Old oak', 'tree') },
        { method: 'PUT', id: 4, body: { name: 'Rose again' } }
      ]
    }).replace('"EXACT_ID"', '9007199254740993'))

    expect(response.statusCode).toBe(200)
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
    const result = (status: number, id: number | bigint, name: string, tag?: string) =>
      `{"status":${status},"plant":${plantJson(BigInt(id), name, tag)},"etag":${JSON.stringify(etagOf(Number(id), name, tag))}}`
    expect(response.body).toBe(`{"results":[${[
      `{"status":200,"plant":{"id":9007199254740993,"name":"Exact"},"etag":${JSON.stringify(entityTagOf('{"id":9007199254740993,"name":"Exact"}'))}}`,
      result(201, 20, 'Oak', 'tree'), result(200, 2, 'Moss', 'shade'), result(200, 1, 'Fern'), '{"status":204}', result(200, 3, 'Ivy', 'wall'),
      result(200, 20, 'Old oak', 'tree'), '{"status":204}', result(201, 4, 'Rose again')
    ].join(',')}]}`)
    expect(await everyPlant(app)).toBe('[{"id":1,"name":"Fern"},{"id":2,"name":"Moss","tag":"shade"},{"id":3,"name":"Ivy","tag":"wall"},' +
      '{"id":4,"name":"Rose again"},{"id":5,"name":"Sage"},{"id":9007199254740993,"name":"Exact"}]')
    const read = await app.inject({ method: 'GET', url: '/plants/2', headers: bearer() })
    expect(read.headers.etag).toBe(etagOf(2, 'Moss', 'shade'))
  })

  it.each([
    ['a POST of an id with another name', [{ method: 'POST', body: { id: 1, name: 'Not fern' } }], 409, 'operations[1]: plant 1 already exists with a different name or tag'],
    ['a PATCH of a missing plant', [{ method: 'PATCH', id: 99, body: { name: 'x' } }], 404, 'operations[1]: no plant has id 99'],
    ['a DELETE of a missing plant', [{ method: 'DELETE', id: 99 }], 404, 'operations[1]: no plant has id 99'],
    ['a plant the batch deleted before', [{ method: 'DELETE', id: 5 }, { method: 'DELETE', id: 5 }], 404, 'operations[2]: no plant has id 5'],
    ['an If-Match of another version', [{ method: 'PUT', id: 2, body: { name: 'x' }, ifMatch: '"stale"' }], 412,
      'operations[1]: plant 2 is not in the state the request\'s If-Match or If-None-Match expects; read it again for its current ETag'],
    ['an If-Match the batch\'s earlier write made stale', [{ method: 'PATCH', id: 2, body: { tag: 'a' } }, { method: 'DELETE', id: 2, ifMatch: etagOf(2, 'Moss') }], 412,
      'operations[2]: plant 2 is not in the state the request\'s If-Match or If-None-Match expects; read it again for its current ETag'],
    ['a create-only PUT of a plant that exists', [{ method: 'PUT', id: 3, body: { name: 'x' }, ifNoneMatch: '*' }], 412,
      'operations[1]: plant 3 is not in the state the request\'s If-Match or If-None-Match expects; read it again for its current ETag'],
    ['an If-Match of a missing plant', [{ method: 'DELETE', id: 77, ifMatch: '*' }], 412, 'operations[1]: plant 77 does not exist, and the request\'s If-Match needs it to']
  ])('refuses %s with its status, naming the operation, and applies nothing', async (_case, failing, status, message) => {
    const app = await build()
    await seed(app)
    const before = await everyPlant(app)

    const response = await batch(app, [{ method: 'PUT', id: 6, body: { name: 'Applied first' } }, ...failing, { method: 'DELETE', id: 1 }])

    expectError(response, status, message)
    expect(await everyPlant(app)).toBe(before)
  })

  const STALE = 'is not in the state the request\'s If-Match or If-None-Match expects; read it again for its current ETag'
  it.each([
    ['a missing plant before a malformed operation', [{ method: 'DELETE', id: 99 }, { method: 'POST', body: { id: 8, name: '' } }], 404, 'operations[0]: no plant has id 99'],
    ['a malformed operation before a missing plant', [{ method: 'POST', body: { id: 8, name: '' } }, { method: 'DELETE', id: 99 }], 400, 'operations[0]: name must be at least 1 character long'],
    ['a stale If-Match before an id that differs from its body\'s', [{ method: 'PUT', id: 2, body: { name: 'x' }, ifMatch: '"stale"' }, { method: 'PUT', id: 2, body: { id: 3, name: 'x' } }],
      412, `operations[0]: plant 2 ${STALE}`],
    ['a conflicting POST before an unreadable If-Match', [{ method: 'PUT', id: 6, body: { name: 'x' } }, { method: 'POST', body: { id: 1, name: 'Not fern' } }, { method: 'DELETE', id: 2, ifMatch: 'nope' }],
      409, 'operations[1]: plant 1 already exists with a different name or tag'],
    ['operations that would apply before a malformed one', [{ method: 'PUT', id: 6, body: { name: 'x' } }, { method: 'DELETE', id: 1 }, { method: 'DELETE', id: 2, ifMatch: 'nope' }],
      400, 'operations[2]: ifMatch must be * or a comma-separated list of quoted entity tags, such as "xyzzy", W/"xyzzy"']
  ])('answers the first failing operation, whether its form or the plant it meets fails it: %s', async (_case, operations, status, message) => {
    const app = await build()
    await seed(app)
    const before = await everyPlant(app)

    expectError(await batch(app, operations), status, message)
    expect(await everyPlant(app)).toBe(before)
  })

  it('answers a batch of POSTs only by what the store holds: new plants created, stored ones replayed, the first conflict named', async () => {
    const app = await build()
    await seed(app)

    const replaying = await batch(app, [
      { method: 'POST', body: { id: 30, name: 'New' } },
      { method: 'POST', body: { id: 1, name: 'Fern', tag: 'shade' } },
      { method: 'POST', body: { id: 31, name: 'Newer', tag: 't' } }
    ])
    // Plant 2 is stored as Moss: the first operation conflicts, though the second would, too, had none been stored.
    const conflicting = await batch(app, [{ method: 'POST', body: { id: 2, name: 'Other' } }, { method: 'POST', body: { id: 2, name: 'Moss' } }])

    expect(replaying.statusCode).toBe(200)
    expect(replaying.json().results.map((result: { status: number, plant: unknown }) => [result.status, result.plant]))
      .toEqual([[200, { id: 30, name: 'New' }], [200, { id: 1, name: 'Fern', tag: 'shade' }], [200, { id: 31, name: 'Newer', tag: 't' }]])
    expectError(conflicting, 409, 'operations[0]: plant 2 already exists with a different name or tag')
    expect(await everyPlant(app)).toBe('[{"id":1,"name":"Fern","tag":"shade"},{"id":2,"name":"Moss"},{"id":3,"name":"Ivy","tag":"wall"},' +
      '{"id":4,"name":"Rose"},{"id":5,"name":"Sage"},{"id":30,"name":"New"},{"id":31,"name":"Newer","tag":"t"}]')
  })

  it('sees, in each operation, what the earlier ones of the batch did to its plant', async () => {
    const app = await build()

    const response = await batch(app, [
      { method: 'POST', body: { id: 7, name: 'a' } },
      { method: 'POST', body: { id: 7, name: 'a' } },
      { method: 'PATCH', id: 7, body: { name: 'b' }, ifMatch: etagOf(7, 'a') },
      { method: 'PUT', id: 7, body: { name: 'c', tag: 't' }, ifMatch: etagOf(7, 'b') },
      { method: 'DELETE', id: 7 },
      { method: 'PUT', id: 7, body: { name: 'd' }, ifNoneMatch: '*' }
    ])

    expect(response.json().results.map((result: { status: number }) => result.status)).toEqual([200, 200, 200, 200, 204, 201])
    expect(await everyPlant(app)).toBe('[{"id":7,"name":"d"}]')
  })
})

describe('POST /plants/batch refuses what is not a batch, before any store call', () => {
  const untouched = async () => {
    const app = await buildTestApp()
    await seed(app)
    return { app, before: await everyPlant(app) }
  }

  it.each([
    ['{}', 'operations is required'],
    ['{"operations":[]}', 'operations must not be empty'],
    ['{"operations":{}}', 'operations must be an array'],
    ['[]', 'request body must be a JSON object'],
    [JSON.stringify({ operations: Array.from({ length: 1001 }, (_, id) => ({ method: 'DELETE', id })) }), 'operations must hold at most 1000 items'],
    ['{"operations":[{"method":"DELETE","id":1},{"method":"GET","id":1}]}', 'operations[1]: method must be one of POST, PUT, PATCH, DELETE'],
    ['{"operations":[{"method":"delete","id":1}]}', 'operations[0]: method must be one of POST, PUT, PATCH, DELETE'],
    ['{"operations":[7]}', 'operations[0]: must be a JSON object'],
    ['{"operations":[{"method":"PUT","body":{"name":"x"}}]}', 'operations[0]: id is required'],
    ['{"operations":[{"method":"DELETE","id":"1"}]}', 'operations[0]: id must be an integer from -9223372036854775808 to 9223372036854775807'],
    ['{"operations":[{"method":"DELETE","id":9223372036854775808}]}', 'operations[0]: id must be an integer from -9223372036854775808 to 9223372036854775807'],
    ['{"operations":[{"method":"POST"}]}', 'operations[0]: body is required'],
    ['{"operations":[{"method":"POST","body":{"id":1.5,"name":"x"}}]}', 'operations[0]: id must be an integer from -9223372036854775808 to 9223372036854775807'],
    ['{"operations":[{"method":"POST","body":{"id":8,"name":""}}]}', 'operations[0]: name must be at least 1 character long'],
    ['{"operations":[{"method":"PATCH","id":2,"body":{"name":null}}]}', 'operations[0]: name must be a string'],
    ['{"operations":[{"method":"PATCH","id":2,"body":[]}]}', 'operations[0]: body must be a JSON object'],
    ['{"operations":[{"method":"PUT","id":2,"body":{"id":3,"name":"x"}}]}', 'operations[0]: id in the body (3) must equal the id in the path (2); a plant\'s id cannot change'],
    ['{"operations":[{"method":"DELETE","id":2,"ifMatch":"nope"}]}', 'operations[0]: ifMatch must be * or a comma-separated list of quoted entity tags, such as "xyzzy", W/"xyzzy"'],
    ['{"operations":[{"method":"DELETE","id":2,"ifNoneMatch":5}]}', 'operations[0]: ifNoneMatch must be a string']
  ])('%s: 400 %s', async (body, message) => {
    const { app, before } = await untouched()

    expectError(await batch(app, body), 400, message)
    expect(await everyPlant(app)).toBe(before)
  })

  it('answers a body over BATCH_BODY_LIMIT with a 413, also when chunked, and one at the limit as usual', async () => {
    const body = JSON.stringify({ operations: [{ method: 'POST', body: { id: 1, name: 'x'.repeat(100) } }] })
    const app = await buildTestApp({ config: { batchBodyLimit: body.length } })
    const over = JSON.stringify({ operations: [{ method: 'POST', body: { id: 1, name: 'x'.repeat(101) } }] })

    expectError(await batch(app, over), 413, `request body is larger than ${body.length} bytes`)
    const chunked = await app.inject({
      method: 'POST', url: '/plants/batch', headers: { ...bearer(), 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, payload: over
    })
    expectError(chunked, 413, `request body is larger than ${body.length} bytes`)
    expect((await batch(app, body)).statusCode).toBe(200)
    // The limit of the other routes stays BODY_LIMIT's, whatever the batch's.
    expect((await postPlant(app, { id: 2, name: 'y'.repeat(256), tag: 'z'.repeat(256) })).statusCode).toBe(200)
  })

  it('needs plants:write, and a JSON body', async () => {
    const app = await buildTestApp({ tokens: [TEST_TOKEN, 'name=reader;scopes=plants:read;reader-token'] })

    const operations = JSON.stringify({ operations: [{ method: 'POST', body: { id: 1, name: 'Fern' } }] })
    for (const type of ['text/plain', 'application/merge-patch+json']) {
      const unsupported = await app.inject({ method: 'POST', url: '/plants/batch', headers: { ...bearer(), 'content-type': type }, payload: operations })
      expectError(unsupported, 415, 'Content-Type must be application/json')
    }
    const unlabelled = await app.inject({ method: 'POST', url: '/plants/batch', headers: bearer(), payload: operations })
    expectError(unlabelled, 415, 'Content-Type must be application/json')
    expect((await app.inject({ method: 'GET', url: '/plants/1', headers: bearer() })).statusCode).toBe(404)
    const refused = await app.inject({ method: 'POST', url: '/plants/batch', headers: { ...bearer('reader-token'), 'content-type': 'application/json' }, payload: '{}' })
    expectError(refused, 403, 'this token lacks the scope "plants:write", which this operation needs')
    const reading = await app.inject({ method: 'GET', url: '/plants/batch', headers: bearer('reader-token') })
    expectError(reading, 405, '/plants/batch does not support GET; allowed: POST')
  })
})

describe.each(backends)('Batches among other writes on $name', (backend) => {
  it('are never seen in part: 50 plants retagged together, read meanwhile, always all or none', async () => {
    const app = await buildTestApp({ store: await backend.open() })
    const ids = Array.from({ length: 50 }, (_, index) => index + 1)
    expect((await batch(app, ids.map((id) => ({ method: 'PUT', id, body: { name: `p${id}`, tag: 'even' } })))).statusCode).toBe(200)
    const counts: number[] = []
    const writing = { on: true }
    const reader = (async () => {
      while (writing.on) {
        const [even, odd] = await Promise.all(['even', 'odd'].map((tag) => app.inject({ method: 'GET', url: `/plants?tag=${tag}&limit=1000`, headers: bearer() })))
        counts.push((even?.json() as unknown[]).length, (odd?.json() as unknown[]).length)
      }
    })()

    for (let round = 0; round < 12; round++) {
      const tag = round % 2 === 0 ? 'odd' : 'even'
      const answers = await Promise.all([
        batch(app, ids.map((id) => ({ method: 'PATCH', id, body: { tag } }))),
        // Single writes of the same ids, racing the batch: each goes before or after it, never into it.
        app.inject({ method: 'PATCH', url: '/plants/7', headers: { ...bearer(), 'content-type': 'application/merge-patch+json' }, payload: '{"name":"p7"}' }),
        postPlant(app, { id: 8, name: 'p8', tag: 'other' })
      ])
      expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 409])
    }
    writing.on = false
    await reader

    expect(counts.length).toBeGreaterThan(0)
    expect(counts.filter((count) => count !== 0 && count !== 50)).toEqual([])
  })

  it('that all POST the same new ids as single writes do: each plant made once, by one or the other, and no batch partly', async () => {
    const store = await backend.open()
    const app = await buildTestApp({ store })
    const ids = Array.from({ length: 40 }, (_, index) => 1000 + index)

    const answers = await Promise.all([
      batch(app, ids.map((id) => ({ method: 'POST', body: { id, name: `n${id}` } }))),
      batch(app, ids.slice(20).map((id) => ({ method: 'POST', body: { id, name: `n${id}` } }))),
      ...ids.filter((id) => id % 3 === 0).map((id) => postPlant(app, { id, name: `n${id}` }))
    ])

    expect(answers.map((answer) => answer.statusCode).filter((status) => status !== 200)).toEqual([])
    expect(JSON.parse(await everyPlant(app))).toEqual(ids.map((id) => ({ id, name: `n${id}` })))
  })
})

describe.each(backends)('A batch whose plants another writer changes every time it is decided, on $name', (backend) => {
  it('is a 503 with Retry-After after 16 decisions, and applies nothing', async () => {
    const store = await backend.open()
    let interferences = 0
    // The store as the route sees it: before each of the batch's writes, another write changes plant 1.
    const contested = new Proxy(store, {
      get (target, property, receiver) {
        if (property !== 'writePlan') return Reflect.get(target, property, receiver) as unknown
        return async (plan: WritePlan) => {
          await target.put({ id: 1n, name: `changed ${++interferences}` })
          return target.writePlan(plan)
        }
      }
    })
    const app = await buildTestApp({ store: contested })
    expect((await postPlant(app, { id: 1, name: 'Fern' })).statusCode).toBe(200)

    const response = await batch(app, [{ method: 'POST', body: { id: 2, name: 'Moss' } }, { method: 'PATCH', id: 1, body: { tag: 'shade' } }])

    expectError(response, 503, /^the batch's plants were changed by other writes each of the 16 times it was decided; nothing was applied, retry later; request id \S+$/)
    expect(response.headers['retry-after']).toBe('1')
    expect(interferences).toBe(16)
    expect(await everyPlant(app)).toBe('[{"id":1,"name":"changed 16"}]')
  })
})

describe('A batch\'s webhook events, log line and metrics', () => {
  it('records one event per write that changed a plant (none for a replay or a PUT that changes nothing), each plant\'s in order', async () => {
    const receiver = await WebhookReceiver.start()
    const app = await buildTestApp({ tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    await subscribe(app, receiver)
    expect((await postPlant(app, { id: 1, name: 'Fern' })).statusCode).toBe(200)
    await receiver.waitForDeliveries(1)

    const response = await batch(app, [
      { method: 'POST', body: { id: 1, name: 'Fern' } },
      { method: 'PUT', id: 1, body: { name: 'Fern' } },
      { method: 'PATCH', id: 1, body: { tag: 'a' } },
      { method: 'POST', body: { id: 2, name: 'Moss' } },
      { method: 'PATCH', id: 1, body: { tag: 'b' } },
      { method: 'DELETE', id: 1 },
      { method: 'PATCH', id: 2, body: { name: 'Moss' } }
    ])

    expect(response.statusCode).toBe(200)
    await receiver.waitForDeliveries(5)
    const events = receiver.deliveries.slice(1).map((delivery) => `${delivery.type} ${delivery.body}`)
    expect(events.filter((event) => event.includes('"id":1')).map((event) => event.split(' ')[0] ?? '')).toEqual(['plant.updated', 'plant.updated', 'plant.deleted'])
    expect(events.sort()).toEqual([
      'plant.created {"id":2,"name":"Moss"}', 'plant.deleted {"id":1}', 'plant.updated {"id":1,"name":"Fern","tag":"a"}',
      'plant.updated {"id":1,"name":"Fern","tag":"b"}'
    ])
  })

  it('logs how many operations a batch had and whether they were applied, and counts them by method', async () => {
    const chunks: string[] = []
    const stream = new Writable({ write (chunk: Buffer, _encoding, done) { chunks.push(chunk.toString()); done() } })
    const app = await buildTestApp({ logStream: stream, config: { logLevel: 'info', metrics: true } })

    await batch(app, [{ method: 'POST', body: { id: 1, name: 'a' } }, { method: 'POST', body: { id: 2, name: 'b' } }, { method: 'DELETE', id: 1 }])
    await batch(app, [{ method: 'DELETE', id: 99 }])
    await new Promise(setImmediate)
    const lines = chunks.join('').split('\n').filter((line) => line.includes('request completed')).map((line) => JSON.parse(line) as Record<string, unknown>)
    const metrics = await app.metrics?.registry.metrics() ?? ''

    expect(lines.map(({ statusCode, operations, applied }) => ({ statusCode, operations, applied }))).toEqual([
      { statusCode: 200, operations: 3, applied: true }, { statusCode: 404, operations: 1, applied: false }
    ])
    expect(metrics).toContain('plantstore_plant_batch_operations_total{method="POST",applied="true"} 2')
    expect(metrics).toContain('plantstore_plant_batch_operations_total{method="DELETE",applied="true"} 1')
    expect(metrics).toContain('plantstore_plant_batch_operations_total{method="DELETE",applied="false"} 1')
  })
})
