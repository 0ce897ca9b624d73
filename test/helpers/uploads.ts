import { connect, type Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { onTestFinished } from 'vitest'

/** How an upload to a listening app ended, seen from both sides. */
export interface UploadOutcome {
  /** Everything the server answered, as text. */
  readonly answer: string
  /** Body bytes the client's kernel accepted before the connection ended or the body was all sent. */
  readonly bodyBytesWritten: number
  /** How the client's writing ended: 'sent' (all of it), or the error code (EPIPE, ECONNRESET). */
  readonly writing: string
  /** Bytes the server read from this connection, in total, by the time it closed. */
  readonly serverBytesRead: number
  /** From the first byte sent to the connection's close, in milliseconds. */
  readonly elapsedMs: number
}

const CHUNK = Buffer.alloc(64 * 1024, 'x')

/** The port of an app listening on 127.0.0.1. */
export function portOf (app: FastifyInstance): number {
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('app is not listening')
  return address.port
}

/**
 * Sends `head` (a request line and headers, ending with the blank line), then up to `bodyBytes` bytes
 * of body as fast as the connection takes them (in HTTP/1.1 chunks when `chunked`), reading whatever
 * the server answers meanwhile (or, with `readAfterSending`, only then), until the connection closes. The server's side is measured on the
 * server's own socket.
 */
export async function uploadTo (
  app: FastifyInstance,
  head: string,
  bodyBytes: number,
  options: { chunked?: boolean, readAfterSending?: boolean } = {}
): Promise<UploadOutcome> {
  const serverSocket = new Promise<Socket>((resolve) => { app.server.once('connection', resolve) })
  // Half-open allowed: the client goes on sending after the server's answer and FIN, as a hostile one would.
  const socket = connect({ port: portOf(app), host: '127.0.0.1', allowHalfOpen: true })
  onTestFinished(() => { socket.destroy() })
  const startedAt = performance.now()
  let answer = ''
  let bodyBytesWritten = 0
  let writing = 'writing'
  socket.on('data', (data) => { answer += data.toString('latin1') })
  socket.on('error', (error: NodeJS.ErrnoException) => { if (writing === 'writing') writing = error.code ?? error.message })
  const closed = new Promise<void>((resolve) => { socket.on('close', () => { resolve() }) })
  await new Promise<void>((resolve) => { socket.once('connect', () => { resolve() }) })
  // A client that reads only once it has sent everything, as many simple ones do.
  if (options.readAfterSending === true) socket.pause()
  socket.write(head)
  const server = await serverSocket
  const serverClosed = new Promise<number>((resolve) => { server.once('close', () => { resolve(server.bytesRead) }) })

  while (bodyBytesWritten < bodyBytes && writing === 'writing' && !socket.destroyed) {
    const size = Math.min(CHUNK.length, bodyBytes - bodyBytesWritten)
    const chunk = options.chunked === true
      ? Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), CHUNK.subarray(0, size), Buffer.from('\r\n')])
      : CHUNK.subarray(0, size)
    const failure = await new Promise<NodeJS.ErrnoException | null | undefined>((resolve) => { socket.write(chunk, resolve) })
    if (failure !== undefined && failure !== null) {
      if (writing === 'writing') writing = failure.code ?? failure.message
      break
    }
    bodyBytesWritten += size
  }
  if (writing === 'writing') {
    writing = bodyBytesWritten >= bodyBytes ? 'sent' : 'stopped'
    if (options.chunked === true && !socket.destroyed) socket.write('0\r\n\r\n')
    socket.end()
  }
  socket.resume()
  await closed
  return { answer, bodyBytesWritten, writing, serverBytesRead: await serverClosed, elapsedMs: performance.now() - startedAt }
}

/** The status and the headers (names in lower case) of the first answer in `answer`. */
export function headOf (answer: string): { status: number, headers: Record<string, string>, body: string } {
  const headEnd = answer.indexOf('\r\n\r\n')
  const [statusLine = '', ...lines] = answer.slice(0, headEnd).split('\r\n')
  const headers = Object.fromEntries(lines.map((line) => {
    const colon = line.indexOf(':')
    return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]
  }))
  const length = Number(headers['content-length'] ?? 0)
  return { status: Number(statusLine.split(' ')[1]), headers, body: answer.slice(headEnd + 4, headEnd + 4 + length) }
}
