import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Server } from 'node:net'
import { onTestFinished } from 'vitest'

/** Listens on a free port of 127.0.0.1 and resolves with it; `close` (by default the server's) runs when the test ends. */
export async function listenOnLoopback (server: Server, close = () => closeServer(server)): Promise<number> {
  await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve) })
  onTestFinished(close)
  return (server.address() as AddressInfo).port
}

function closeServer (server: Server): Promise<void> {
  return new Promise((resolve) => { server.close(() => { resolve() }) })
}

/** An HTTP server whose handler gets each request with its whole body. */
export function serverOfWholeRequests (handle: (request: IncomingMessage, body: Buffer, response: ServerResponse) => void) {
  return createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => { handle(request, Buffer.concat(chunks), response) })
  })
}
