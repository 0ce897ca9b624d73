import type { IncomingMessage, ServerResponse } from 'node:http'
import { describe, expect, it } from 'vitest'
import { ChangesExpiredError, Plantstore, PlantstoreError, type Change } from '../../clients/typescript/src/index.js'
import { listenOnLoopback, serverOfWholeRequests } from '../helpers/test-servers.js'

const HEAD = 9007199254740993n
const AT = '2026-11-27T17:00:00.123Z'

/** A change as the service writes it, one line of JSON with exact integers. */
function changeLine (seq: bigint, type = 'plant.updated'): string {
  const plant = type === 'plant.deleted' ? '' : `,"plant":{"id":${seq - 100n},"name":"Fern ${seq}"}`
  return `{"seq":${seq},"type":"${type}","id":${seq - 100n}${plant},"at":"${AT}"}`
}
const event = (seq: bigint, type = 'plant.updated'): string => `id: ${seq}\nevent: ${type}\ndata: ${changeLine(seq, type)}\n\n`

type Stream = (response: ServerResponse, request: IncomingMessage) => void

const eventStream = (...writes: Array<string | ((response: ServerResponse, request: IncomingMessage) => void)>): Stream => (response, request) => {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' })
  for (const write of writes) {
    if (typeof write === 'string') response.write(write)
    else write(response, request)
  }
}
/** The connection cut without an end, once what was written has gone out. */
const drop = (_response: ServerResponse, request: IncomingMessage): void => { setTimeout(() => request.socket.destroy(), 50) }
const end = (response: ServerResponse): void => { response.end() }
const refuse = (status: number, headers: Record<string, string> = {}): Stream => (response) => {
  response.writeHead(status, { 'content-type': 'application/json', 'x-request-id': `req-${status}`, ...headers })
  response.end(JSON.stringify({ error: status, message: `refused with ${status}` }))
}

/** A real HTTP server standing in for the changes routes: the head, then each stream request answered by the next script. */
async function scriptedFeed (streams: readonly Stream[]) {
  const requests: URL[] = []
  const headers: Array<IncomingMessage['headers']> = []
  const server = serverOfWholeRequests((request, _body, response) => {
    const url = new URL(request.url ?? '/', 'http://feed')
    if (url.pathname === '/plants/changes/head') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(`{"seq":${HEAD}}`)
      return
    }
    requests.push(url)
    headers.push(request.headers)
    const stream = streams[Math.min(requests.length, streams.length) - 1]!
    stream(response, request)
  })
  const port = await listenOnLoopback(server, () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const ps = new Plantstore({ baseUrl: `http://127.0.0.1:${port}`, token: 'pst_feed', retryDelay: { initialMs: 10, maxMs: 200 } })
  return { ps, requests, headers }
}

async function firstChanges (changes: AsyncIterable<Change>, count: number): Promise<Change[]> {
  const taken: Change[] = []
  for await (const change of changes) {
    taken.push(change)
    if (taken.length === count) break
  }
  return taken
}

describe('Following changes through a stream that breaks', () => {
  it('yields each change once and in order across a dropped connection, a closed stream and a 503, resuming after the last seq', async () => {
    const { ps, requests, headers } = await scriptedFeed([
      eventStream(event(HEAD + 1n, 'plant.created'), event(HEAD + 2n).slice(0, 20), (response) => { response.write(event(HEAD + 2n).slice(20)) }, drop),
      eventStream(': still here\n\n', event(HEAD + 2n), event(HEAD + 3n), end),
      refuse(503, { 'retry-after': '0' }),
      eventStream('event: other\ndata: {}\n\n', event(HEAD + 4n, 'plant.deleted'))
    ])
    const changes = await firstChanges(ps.changes.follow(), 3)
    expect(changes).toEqual([
      { seq: HEAD + 1n, type: 'plant.created', id: HEAD - 99n, plant: { id: HEAD - 99n, name: `Fern ${HEAD + 1n}` }, at: AT },
      { seq: HEAD + 2n, type: 'plant.updated', id: HEAD - 98n, plant: { id: HEAD - 98n, name: `Fern ${HEAD + 2n}` }, at: AT },
      { seq: HEAD + 3n, type: 'plant.updated', id: HEAD - 97n, plant: { id: HEAD - 97n, name: `Fern ${HEAD + 3n}` }, at: AT }
    ])
    const more = await firstChanges(ps.changes.follow({ after: HEAD + 3n }), 1)
    expect(more).toEqual([{ seq: HEAD + 4n, type: 'plant.deleted', id: HEAD - 96n, at: AT }])
    expect(requests.map((url) => url.search)).toEqual([
      `?after=${HEAD}`, `?after=${HEAD + 2n}`, `?after=${HEAD + 3n}`, `?after=${HEAD + 3n}`
    ])
    expect(headers.map((sent) => [sent.accept, sent.authorization, sent['last-event-id']])).toEqual([
      ['text/event-stream', 'Bearer pst_feed', `${HEAD}`],
      ['text/event-stream', 'Bearer pst_feed', `${HEAD + 2n}`],
      ['text/event-stream', 'Bearer pst_feed', `${HEAD + 3n}`],
      ['text/event-stream', 'Bearer pst_feed', `${HEAD + 3n}`]
    ])
  })

  it('sends the filters, and throws ChangesExpiredError on 410', async () => {
    const { ps, requests } = await scriptedFeed([refuse(410)])
    const error = await firstChanges(ps.changes.follow({ after: 5, tag: 'shade', types: ['plant.created', 'plant.deleted'] }), 1).catch((reason: unknown) => reason)
    expect(error).toBeInstanceOf(ChangesExpiredError)
    expect(error).toBeInstanceOf(PlantstoreError)
    expect(error).toMatchObject({ name: 'ChangesExpiredError', status: 410, error: 410, message: 'refused with 410', requestId: 'req-410' })
    expect(requests.map((url) => url.search)).toEqual(['?after=5&tag=shade&type=plant.created%2Cplant.deleted'])
  })

  it('throws another 4xx at once, and an answer that is no event stream', async () => {
    const refused = await scriptedFeed([refuse(401)])
    await expect(firstChanges(refused.ps.changes.follow({ after: 0 }), 1)).rejects.toMatchObject({ name: 'PlantstoreError', status: 401 })
    expect(refused.requests).toHaveLength(1)
    const json = await scriptedFeed([refuse(200)])
    await expect(firstChanges(json.ps.changes.follow({ after: 0 }), 1)).rejects.toThrow('GET /plants/changes answered application/json, not an event stream')
  })

  it('ends without an error when the signal aborts, on an idle stream or between attempts', async () => {
    for (const stream of [eventStream(': idle\n\n'), refuse(503, { 'retry-after': '5' })]) {
      const { ps } = await scriptedFeed([stream])
      const controller = new AbortController()
      setTimeout(() => controller.abort(), 150)
      const started = performance.now()
      expect(await firstChanges(ps.changes.follow({ signal: controller.signal }), 1)).toEqual([])
      expect(performance.now() - started).toBeLessThan(2000)
    }
  })
})
