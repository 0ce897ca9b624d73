import pg from 'pg'

const LISTEN_RETRY_MS = 1000

/**
 * One connection of its own (a pooled one cannot stay in `LISTEN`) that receives the notifications of
 * one channel and calls the listeners. It connects on the first listener and reconnects a second
 * after it is lost; notifications sent while it is down are missed, which each listener's poll covers.
 */
export class ChannelListener {
  private readonly listeners = new Set<() => void>()
  private client: pg.Client | undefined
  private retry: NodeJS.Timeout | undefined
  private closed = false

  constructor (
    private readonly connectionString: string,
    private readonly connectTimeoutMs: number,
    private readonly channel: string,
    private readonly applicationName: string
  ) {}

  add (listener: () => void): () => void {
    this.listeners.add(listener)
    if (this.client === undefined && this.retry === undefined) this.connect()
    return () => { this.listeners.delete(listener) }
  }

  async close (): Promise<void> {
    this.closed = true
    clearTimeout(this.retry)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => {})
  }

  private connect (): void {
    if (this.closed || this.listeners.size === 0) return
    const client = new pg.Client({
      connectionString: this.connectionString,
      connectionTimeoutMillis: this.connectTimeoutMs,
      application_name: this.applicationName,
      keepAlive: true
    })
    this.client = client
    let lost = false
    const reconnect = () => {
      if (lost) return
      lost = true
      client.end().catch(() => {})
      if (this.client === client) this.client = undefined
      if (!this.closed) this.retry = setTimeout(() => { this.retry = undefined; this.connect() }, LISTEN_RETRY_MS).unref()
    }
    client.on('error', reconnect)
    client.on('end', reconnect)
    client.on('notification', () => {
      for (const listener of this.listeners) listener()
    })
    client.connect()
      .then(() => client.query(`LISTEN ${this.channel}`))
      // Changes made while this was not listening are picked up now rather than at the next poll.
      .then(() => { for (const listener of this.listeners) listener() })
      .catch(reconnect)
  }
}
