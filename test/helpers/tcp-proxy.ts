import net from 'node:net'

/** What the proxy does with traffic: forwards it, forwards it late, holds it (sockets open, nothing moves), or resets every connection. */
export type ProxyMode = { readonly kind: 'pass' } | { readonly kind: 'delay', readonly ms: number } | { readonly kind: 'hold' } | { readonly kind: 'reset' }

/** A TCP proxy on 127.0.0.1 standing in for the network (or a DNS name, a virtual IP) between the service and a server. */
export interface TcpProxy {
  readonly port: number
  /** Forwards traffic as it comes; held connections move again. */
  pass (): void
  /** Forwards every chunk `ms` later, in order. */
  delay (ms: number): void
  /** Stops forwarding in both directions and keeps every socket open, as a hung network does; new connections are accepted and held too. */
  hold (): void
  /** Resets (RST) every open connection, and each new one as it arrives, until another mode is set. */
  reset (): void
  /**
   * The connections open now stop forwarding for good and stay open (their server's host vanished
   * without a word: no FIN, no RST); the mode goes on deciding for new ones.
   */
  freezeOpen (): void
  /** New connections go to `port` from now on (a DNS name or a virtual IP moved); open ones stay where they are. */
  retarget (port: number): void
  /** Connections accepted so far. */
  accepted (): number
  /** Resets every connection and stops listening. */
  close (): Promise<void>
}

interface Pair { readonly client: net.Socket, readonly server: net.Socket }

/** Starts a proxy on `listenPort` (0: any free port) to 127.0.0.1:`targetPort`, in pass mode. */
export async function startTcpProxy (targetPort: number, listenPort = 0): Promise<TcpProxy> {
  let target = targetPort
  let mode: ProxyMode = { kind: 'pass' }
  let accepted = 0
  const pairs = new Set<Pair>()
  const frozen = new Set<Pair>()

  const applyFlow = (pair: Pair) => {
    for (const socket of [pair.client, pair.server]) {
      if (mode.kind === 'hold') socket.pause()
      else socket.resume()
    }
  }
  const forward = (from: net.Socket, to: net.Socket) => {
    from.on('data', (chunk: Buffer) => {
      if (mode.kind === 'delay') setTimeout(() => to.write(chunk), mode.ms)
      else to.write(chunk)
    })
    from.on('end', () => to.end())
    from.on('error', () => to.destroy())
    from.on('close', () => to.destroy())
  }

  const listener = net.createServer((client) => {
    accepted++
    if (mode.kind === 'reset') {
      client.resetAndDestroy()
      return
    }
    const server = net.connect(target, '127.0.0.1')
    const pair = { client, server }
    pairs.add(pair)
    client.on('close', () => pairs.delete(pair))
    forward(client, server)
    forward(server, client)
    applyFlow(pair)
  })
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject)
    listener.listen(listenPort, '127.0.0.1', resolve)
  })

  const setMode = (next: ProxyMode) => {
    mode = next
    if (mode.kind === 'reset') {
      for (const { client, server } of pairs) {
        client.resetAndDestroy()
        server.resetAndDestroy()
      }
      pairs.clear()
    } else for (const pair of pairs) applyFlow(pair)
  }
  const freezeOpen = () => {
    for (const pair of pairs) {
      pair.client.pause()
      pair.server.pause()
      frozen.add(pair)
    }
    pairs.clear()
  }

  return {
    port: (listener.address() as net.AddressInfo).port,
    pass: () => setMode({ kind: 'pass' }),
    delay: (ms) => setMode({ kind: 'delay', ms }),
    hold: () => setMode({ kind: 'hold' }),
    reset: () => setMode({ kind: 'reset' }),
    freezeOpen,
    retarget: (port) => { target = port },
    accepted: () => accepted,
    async close () {
      for (const pair of frozen) pairs.add(pair)
      frozen.clear()
      setMode({ kind: 'reset' })
      await new Promise<void>((resolve) => listener.close(() => resolve()))
    }
  }
}
