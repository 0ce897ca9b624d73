import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** What the server still reads, at most, of a body whose request it answered before the body arrived. */
export const LINGER_MAX_BYTES = 4 * 1024 * 1024
/** ...and for how long at most, after the answer. */
export const LINGER_MAX_MS = 5_000

/** Connections whose last answer is written: a request parsed on one after it is not served. */
const closingConnections = new WeakSet<Socket>()

/** Whether part of the request's body has not yet arrived: answered now, the answer comes "early". */
export function bodyStillArriving (request: IncomingMessage): boolean {
  // (`complete` is undefined on the requests of `app.inject`, which have no connection.)
  if (request.complete !== false) return false
  const { headers } = request
  return headers['transfer-encoding'] !== undefined ||
    (headers['content-length'] !== undefined && headers['content-length'] !== '0')
}

/**
 * Makes an answer sent before the request's body arrived the connection's last: it carries
 * `Connection: close`, and once it is written the connection closes lingeringly, in the spirit of
 * nginx's lingering close. Node would instead read the rest of the body for as long as the request
 * timeout allows (an answer that keeps the connection), or close at once, so that a client still
 * sending gets a connection reset instead of the answer (an answer marked `Connection: close`).
 *
 * Lingering: the server half-closes the connection after the answer, then reads and discards the
 * rest of the body, LINGER_MAX_BYTES and LINGER_MAX_MS at most, and destroys the connection when the
 * body has ended, or at either bound.
 */
export function closeAfterEarlyAnswer (request: IncomingMessage, response: ServerResponse): void {
  if (!bodyStillArriving(request) || response.headersSent) return
  response.setHeader('connection', 'close')
  const socket = request.socket
  closingConnections.add(socket)
  let discarded = 0
  let lingering = false
  const destroyWhenWritten = () => {
    if (socket.writableFinished) socket.destroy()
    else socket.once('finish', () => socket.destroy())
  }
  // Read from here on (so that Node does not discard the body unseen, without bound), and counted.
  request.on('data', (chunk: Buffer) => {
    discarded += chunk.length
    if (lingering && discarded > LINGER_MAX_BYTES) socket.destroy()
  })
  request.once('end', () => { if (lingering) destroyWhenWritten() })
  // Node ends a response marked `Connection: close` with `socket.destroySoon()`: end, then destroy.
  socket.destroySoon = () => {
    lingering = true
    halfCloseThenDestroy(socket, destroyWhenWritten)
    if (request.complete || discarded > LINGER_MAX_BYTES) destroyWhenWritten()
  }
}

/**
 * For the HTTP parser's own refusals, after which nothing on the connection can be parsed: half-closes
 * it after the answer and destroys it when the client closes its side or after LINGER_MAX_MS, so a
 * client still sending can read the answer rather than a reset.
 */
export function closeAfterRefusal (socket: Socket): void {
  halfCloseThenDestroy(socket, () => socket.destroy())
}

/** Ends the server's side now; `destroy` runs when the client ends its own, and the socket is destroyed after LINGER_MAX_MS anyway. */
function halfCloseThenDestroy (socket: Socket, destroy: () => void): void {
  const deadline = setTimeout(() => socket.destroy(), LINGER_MAX_MS)
  socket.once('close', () => clearTimeout(deadline))
  socket.once('end', destroy)
  socket.end()
}

/**
 * Applies `closeAfterEarlyAnswer` to every answer of the app (the router's own refusals call it
 * themselves), and serves nothing more on a connection whose last answer is written.
 */
export const lingeringClose = fp(async function lingeringClose (app: FastifyInstance) {
  app.addHook('onRequest', (request, reply, done) => {
    if (closingConnections.has(request.raw.socket)) {
      reply.hijack()
      request.raw.socket.destroy()
      return
    }
    done()
  })
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.complete === false) closeAfterEarlyAnswer(request.raw, reply.raw)
    done(null, payload)
  })
}, { name: 'lingering-close' })
