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
