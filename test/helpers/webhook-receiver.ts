import type { IncomingHttpHeaders, Server } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { Webhook } from 'standardwebhooks'
import { listenOnLoopback, serverOfWholeRequests } from './test-servers.js'

export interface ReceivedDelivery {
  readonly id: string
  readonly timestamp: number
  readonly type: string
  readonly body: string
  readonly headers: IncomingHttpHeaders
  /** Whether the official `standardwebhooks` package accepted the signature (with the secret set then). */
  readonly verified: boolean
  readonly receivedAt: number
}

/** What the receiver answers a delivery with: a status code, after an optional delay, or once `after` settles. */
export type Answer = (delivery: ReceivedDelivery) => {
  readonly status: number
  readonly delayMs?: number
  readonly after?: Promise<unknown>
  readonly headers?: Record<string, string>
}

/**
 * A real HTTP receiver on 127.0.0.1 that verifies every delivery with the `standardwebhooks` package
 * and records it, answering 204 unless told otherwise. Closed when the test ends.
 */
export class WebhookReceiver {
  readonly deliveries: ReceivedDelivery[] = []
  private secret: string | undefined
  private answer: Answer = () => ({ status: 204 })
  private readonly server: Server
  private listeningPort = 0

  private constructor () {
    this.server = serverOfWholeRequests((request, received, response) => {
      const body = received.toString('utf8')
      const delivery: ReceivedDelivery = {
        id: String(request.headers['webhook-id']),
        timestamp: Number(request.headers['webhook-timestamp']),
        type: String(request.headers['webhook-event']),
        body,
        headers: request.headers,
        verified: this.verifies(body, request.headers),
        receivedAt: Date.now()
      }
      this.deliveries.push(delivery)
      const { status, delayMs = 0, after = Promise.resolve(), headers = {} } = this.answer(delivery)
      after.then(() => setTimeout(() => { response.writeHead(status, headers).end() }, delayMs), () => {})
    })
  }

  static async start (): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver()
    receiver.listeningPort = await listenOnLoopback(receiver.server, () => receiver.close())
    return receiver
  }

  /** The port on 127.0.0.1, the same after `stop` and `restart`. */
  get port (): number {
    return this.listeningPort
  }

  get url (): string {
    return `http://127.0.0.1:${this.listeningPort}/hooks`
  }

  /** The signing secret deliveries are verified with (the one a subscription's creation returned). */
  useSecret (secret: string): void {
    this.secret = secret
  }

  answerWith (answer: Answer): void {
    this.answer = answer
  }

  /** Waits until `count` deliveries arrived; fails after `timeoutMs`. */
  async waitForDeliveries (count: number, timeoutMs = 10_000): Promise<ReceivedDelivery[]> {
    const deadline = Date.now() + timeoutMs
    while (this.deliveries.length < count) {
      if (Date.now() > deadline) throw new Error(`${this.deliveries.length} of ${count} deliveries arrived within ${timeoutMs} ms`)
      await sleep(20)
    }
    return this.deliveries
  }

  /** Closes the port, so connections to it are refused, until `restart`; what arrived is kept. */
  async stop (): Promise<void> {
    await this.close()
  }

  /** Listens again on the port it had before `stop`. */
  async restart (): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.listeningPort, '127.0.0.1', () => {
        this.server.off('error', reject)
        resolve()
      })
    })
  }

  async close (): Promise<void> {
    if (!this.server.listening) return
    this.server.closeAllConnections()
    await new Promise((resolve) => this.server.close(resolve))
  }

  private verifies (body: string, headers: IncomingHttpHeaders): boolean {
    if (this.secret === undefined) return false
    try {
      new Webhook(this.secret).verify(body, headers as Record<string, string>)
      return true
    } catch {
      return false
    }
  }
}

/** Whether the official `standardwebhooks` library accepts the delivery with `secret`. */
export function verifiesWith (delivery: ReceivedDelivery, secret: string): boolean {
  try {
    new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>)
    return true
  } catch {
    return false
  }
}
