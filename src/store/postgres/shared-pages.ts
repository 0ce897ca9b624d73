import type { PageRequest, PlantPage } from '../plant-store.js'

/**
 * Page reads that share one query while it waits for a connection. A request for a page (the same
 * order, position, `limit`, filters and form) identical to one whose statement has not been sent yet joins it: that
 * statement runs after both arrived, so it sees every plant committed before either, as a query of the
 * joining request's own would. Once the statement is sent, a new request starts a query of its own.
 * Under load, when requests queue for the pool's connections, a popular page is read once per wait
 * rather than once per request.
 *
 * A request that joins also takes the shared read's wait for a connection, which fails (a 503) once it
 * has lasted the connect timeout counted from the read's start, not from the joiner's arrival. So a
 * request joins only a read that has waited less than half the connect timeout; it starts a read of its
 * own instead of joining an older one (and later requests join that one). A joiner thus waits for the
 * pool no longer than it would have for a read of its own. (While the schema is being brought up to
 * date after an outage, every request first waits for that too: see connection.ts.)
 */
export class SharedPages {
  readonly #unsent = new Map<string, WaitingRead>()
  readonly #joinableForMs: number

  /** @param connectTimeoutMs how long a read waits for a connection before it fails */
  constructor (connectTimeoutMs: number) {
    this.#joinableForMs = connectTimeoutMs / 2
  }

  /**
   * The page `request` asks for: the one a waiting read of the same page, started less than half the
   * connect timeout ago, will return, or what `read` returns, which must call `onSent` when its statement
   * is written to a connection.
   */
  read (request: PageRequest, read: (onSent: () => void) => Promise<PlantPage>): Promise<PlantPage> {
    const key = keyOf(request)
    const now = performance.now()
    const waiting = this.#unsent.get(key)
    if (waiting !== undefined && now - waiting.since < this.#joinableForMs) return waiting.page
    // `forget` may run before `read` returns (a statement sent at once): then the page is never shared.
    const shared: { entry?: WaitingRead, sent?: true } = {}
    const forget = () => {
      shared.sent = true
      if (shared.entry !== undefined && this.#unsent.get(key) === shared.entry) this.#unsent.delete(key)
    }
    const page = read(forget)
    if (shared.sent === undefined) {
      shared.entry = { page, since: now }
      this.#unsent.set(key, shared.entry)
      // A read that fails before its statement is sent (no connection) is not shared any longer either.
      page.then(forget, forget)
    }
    return page
  }
}

/** A read whose statement has not been sent yet, and when it started (performance.now()). */
interface WaitingRead {
  readonly page: Promise<PlantPage>
  readonly since: number
}

function keyOf (request: PageRequest): string {
  const { after } = request
  return JSON.stringify([request.limit, request.lines === true, request.order ?? 'id', request.tag ?? null, request.q ?? null,
    after === undefined ? null : typeof after === 'bigint' ? after.toString() : [after.name, after.id.toString()]])
}
