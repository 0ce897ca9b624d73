import type { OutgoingHttpHeaders } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { AccessTokenRegistry } from '../auth/token-registry.js'
import { changesExpired, invalidToken, plantNotFound, tooManyChangeStreams } from '../errors.js'
import { DEFAULT_PAGE_SIZE, ref } from '../schemas/kinds.js'
import { ChangeFeedHeaders, ChangeFeedQuery, ChangeHead, ChangePage, HistoryQuery, PlantHistoryPage } from '../schemas/changes.js'
import { PlantIdParams } from '../schemas/plants.js'
import type { ChangeType } from '../store/change-log.js'
import type { PlantStore } from '../store/plant-store.js'
import { historyChangeJson, type ChangeFilter } from './change-json.js'
import type { ChangeStreams, StreamEnding } from './change-streams.js'
import { bearerSecurity } from './docs.js'
import { leaveInFlight } from './load-shedding.js'
import { authenticatedOperationErrors, errorResponses, pathParameterErrors } from './responses.js'

export interface ChangesRoutesOptions {
  readonly store: PlantStore
  readonly streams: ChangeStreams
  readonly accessTokens: Pick<AccessTokenRegistry, 'accepts'>
  /** CHANGES_RETENTION. */
  readonly retentionMs: number
  /** CHANGES_STREAMS_MAX, for the 503's message. */
  readonly streamsMax: number
  /**
   * Told when a stream's answer has closed, and whether it finished (the service ended it) or not (cut, or
   * left by its client): what Fastify does for other answers, its request line and span, is done here.
   */
  readonly streamClosed?: ((request: FastifyRequest, reply: FastifyReply, finished: boolean) => void) | undefined
}

declare module 'fastify' {
  interface FastifyRequest {
    /** How a change stream ended, for its log line; null on other requests. */
    changeStream: StreamEnding | null
  }
}

const READ_SECURITY = bearerSecurity('plants:read')
const EVENT_STREAM_TYPE = 'text/event-stream; charset=utf-8'
const LINK = {
  Link: { type: 'string', description: 'RFC 8288 link to poll or read on: `</plants/changes?after=LAST&limit=N…>; rel="next"`, the filters kept' }
} as const

/**
 * The change feed (`/plants/changes`: pages, the head, a live stream) and each plant's history, in the
 * `/plants` scope, so the same authentication and scopes guard them.
 */
export async function changesRoutes (app: FastifyInstance, options: ChangesRoutesOptions): Promise<void> {
  const { store, streams, retentionMs } = options
  const routes = app.withTypeProvider<TypeBoxTypeProvider>()

  routes.get('/changes/head', {
    schema: {
      operationId: 'getChangeHead',
      summary: 'Where the change feed is now',
      description: 'The greatest `seq` ever committed. To keep a copy of the store: read the head, then the plants (a listing ' +
        'or an export), then follow the changes after the head.',
      tags: ['changes'],
      security: READ_SECURITY,
      response: { 200: { ...ref(ChangeHead), description: 'The head' }, ...authenticatedOperationErrors }
    }
  }, async (_request, reply) => sendJson(reply, `{"seq":${await store.changes.head()}}`))

  routes.get('/changes', {
    schema: {
      operationId: 'listChanges',
      summary: 'Read the changes after a seq, or follow them live',
      description: 'Every write that changed a plant, in commit order: the changes with a `seq` greater than `after`, a page ' +
        'at a time. The `Link` header names the next page on every answer, an empty one included: poll it. With `Accept: ' +
        'text/event-stream` the answer is a live stream of Server-Sent Events instead (`id: <seq>`, `event: <type>`, `data: ' +
        '<the change>`), starting after `Last-Event-ID`, else after `after`, else at the head; a comment line at least every ' +
        '15 s. A resume point whose next changes are no longer kept (CHANGES_RETENTION) is a 410: read the plants again.',
      tags: ['changes'],
      security: READ_SECURITY,
      querystring: ChangeFeedQuery,
      headers: ChangeFeedHeaders,
      response: {
        200: {
          description: 'A page of changes, possibly empty; or, with `Accept: text/event-stream`, the live stream',
          headers: LINK,
          content: {
            'application/json': { schema: ChangePage },
            'text/event-stream': { schema: { type: 'string', description: 'Server-Sent Events, one per change' } }
          }
        },
        ...authenticatedOperationErrors,
        410: errorResponses.changesExpired,
        503: errorResponses.streamsFull
      }
    }
  }, async (request, reply) => {
    const { query } = request
    const filter: ChangeFilter = { tag: query.tag, types: query.type?.split(',') as ChangeType[] | undefined }
    if (wantsEventStream(request)) {
      // HEAD gets a stream's head and no stream: Node never sends a HEAD answer's head before its end, so an
      // opened stream would hold its client, and a CHANGES_STREAMS_MAX slot, with nothing sent.
      if (request.method === 'HEAD') return reply.type(EVENT_STREAM_TYPE).header('cache-control', 'no-store').send()
      const lastEventId = request.headers['last-event-id']
      const after = lastEventId !== undefined ? BigInt(lastEventId) : query.after !== undefined ? BigInt(query.after) : undefined
      return await openStream(request, reply, after, filter)
    }
    const after = query.after === undefined ? 0n : BigInt(query.after)
    const limit = query.limit === undefined ? DEFAULT_PAGE_SIZE : Number(query.limit)
    const page = await store.changes.readJson({ after, limit, ...filter, keptSince: Date.now() - retentionMs })
    if (page.status === 'expired') throw changesExpired(after)
    const last = page.lastSeq ?? after
    let next = `/plants/changes?after=${last}&limit=${limit}`
    if (query.tag !== undefined) next += `&tag=${encodeURIComponent(query.tag)}`
    if (query.type !== undefined) next += `&type=${query.type}`
    reply.header('link', `<${next}>; rel="next"`)
    return sendJson(reply, page.json)
  })

  routes.get('/:id/history', {
    schema: {
      operationId: 'getPlantHistory',
      summary: 'What became of a plant, and who did it',
      description: 'The plant\'s kept changes, newest first, each with the name of the token that made it (`jwt:<sub>` for ' +
        'an identity provider\'s token, `cli` for a command). `Link` names the older ones while more exist. `[]` when the ' +
        'plant exists but none of its changes is kept; 404 when it does not exist and none is. A deleted plant\'s history ' +
        'stays readable for CHANGES_RETENTION: `PUT` its last version back to undelete it.',
      tags: ['changes'],
      security: READ_SECURITY,
      params: PlantIdParams,
      querystring: HistoryQuery,
      response: {
        200: {
          ...PlantHistoryPage,
          description: 'The plant\'s changes, newest first',
          headers: { Link: { type: 'string', description: 'RFC 8288 link to the older changes: `</plants/{id}/history?after=SEQ&limit=N>; rel="next"`' } }
        },
        ...authenticatedOperationErrors,
        ...pathParameterErrors,
        404: errorResponses[404]
      }
    }
  }, async (request, reply) => {
    const id = BigInt(request.params.id)
    const before = request.query.after === undefined ? undefined : BigInt(request.query.after)
    const limit = request.query.limit === undefined ? DEFAULT_PAGE_SIZE : Number(request.query.limit)
    // As the feed, never a change past the retention, pruned or not yet: the oldest, so they end a history.
    const keptSince = Date.now() - retentionMs
    const changes = (await store.changes.history({ id, before, limit: limit + 1 })).filter((change) => change.at >= keptSince)
    if (changes.length === 0 && await store.get(id) === undefined) {
      // Older than `after` there is none; a 404 still when there is no kept change at all.
      const newest = before === undefined ? undefined : (await store.changes.history({ id, limit: 1 }))[0]
      if (newest === undefined || newest.at < keptSince) throw plantNotFound(id)
    }
    const page = changes.slice(0, limit)
    if (changes.length > limit) reply.header('link', `</plants/${id}/history?after=${(page.at(-1) as { seq: bigint }).seq}&limit=${limit}>; rel="next"`)
    return sendJson(reply, `[${page.map(historyChangeJson).join(',')}]`)
  })

  /** Answers with a live stream, which the response's close ends (the client, the streams' own limits, the stop). */
  async function openStream (request: FastifyRequest, reply: FastifyReply, after: bigint | undefined, filter: ChangeFilter): Promise<FastifyReply> {
    if (streams.full) throw tooManyChangeStreams(options.streamsMax)
    const identity = request.accessToken
    if (identity === null) throw new Error('a change stream opened without a token')
    // A service token is asked about again and again (revoked, replaced, its scope taken, expired); an
    // identity provider's JWT, which cannot be revoked, ends at its `exp`.
    const isJwt = identity.secretFingerprint === undefined
    const stillAuthorized = isJwt
      ? () => identity.expiresAtMs > Date.now()
      : () => options.accessTokens.accepts(identity, 'plants:read')
    if (!stillAuthorized()) throw invalidToken()
    const prepared = await streams.prepare({ after, filter, stillAuthorized })
    if (prepared.status === 'expired') throw changesExpired(after ?? 0n)
    leaveInFlight(reply)
    reply.hijack()
    reply.raw.writeHead(200, {
      ...reply.getHeaders() as OutgoingHttpHeaders,
      'content-type': EVENT_STREAM_TYPE,
      'cache-control': 'no-store',
      // Proxies that buffer answers (nginx) send each event at once.
      'x-accel-buffering': 'no'
    })
    prepared.start(reply.raw, (ending) => { request.changeStream = ending })
    const closed = () => { options.streamClosed?.(request, reply, reply.raw.writableFinished) }
    if (reply.raw.closed) closed()
    else reply.raw.once('close', closed)
    return reply
  }
}

/** Whether the request asks for Server-Sent Events. */
function wantsEventStream (request: FastifyRequest): boolean {
  return request.headers.accept?.toLowerCase().includes('text/event-stream') === true
}

function sendJson (reply: FastifyReply, json: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json)
}
