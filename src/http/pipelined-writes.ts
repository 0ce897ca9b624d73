import { finished } from 'node:stream'
import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const LAST_REQUEST = Symbol('plantstore.lastRequestOnConnection')
const LAST_WRITE = Symbol('plantstore.lastWriteOnConnection')

type ConnectionSocket = Socket & { [LAST_REQUEST]?: ServerResponse, [LAST_WRITE]?: ServerResponse }

/**
 * Requests pipelined on one connection take effect in their order (docs/explanations/guarantees-writes.md): a read sees the writes sent
 * before it, and a write is not seen by the requests sent before it. Node hands every pipelined request
 * to the app as soon as it is parsed, so without this a GET behind a POST reads the store while the
 * POST still waits for its commit. Each request leaves its response on its connection; a read waits for
 * the last earlier write's response to finish, a write for the last earlier request's (responses finish
 * in order, so that is all of them). Traffic that is not pipelined only sets two properties.
 */
export const pipelinedWrites = fp(async function pipelinedWrites (app: FastifyInstance) {
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket as ConnectionSocket | null
    if (socket === null) {
      done()
      return
    }
    const isWrite = UNSAFE_METHODS.has(request.method)
    const mustFollow = isWrite ? socket[LAST_REQUEST] : socket[LAST_WRITE]
    socket[LAST_REQUEST] = reply.raw
    if (isWrite) socket[LAST_WRITE] = reply.raw
    if (mustFollow === undefined || mustFollow.writableFinished) {
      done()
      return
    }
    // Responses leave in order anyway, so waiting costs this request nothing it would not wait for.
    finished(mustFollow, () => { done() })
  })
}, { name: 'pipelined-writes' })
