import type { PageRequest, PlantPage } from '../plant-store.js'

/**
 * Page reads that share one query while it waits for a connection. A request for a page (the same
 * `after`, `limit`, `tag` and form) identical to one whose statement has not been sent yet joins it: that
 * statement runs after both arrived, so it sees every plant committed before either, as a query of the
 * joining request's own would. Once the statement is sent, a new request starts a query of its own.
 * Under load, when requests queue for the pool's connections, a popular page is read once per wait
 * rather than once per request.
 */
export class SharedPages {
  readonly #unsent = new Map<string, Promise<PlantPage>>()

  /**
   * The page `request` asks for: the one a waiting read of the same page will return, or what `read`
   * returns, which must call `onSent` when its statement is written to a connection.
   */
  read (request: PageRequest, read: (onSent: () => void) => Promise<PlantPage>): Promise<PlantPage> {
    const key = keyOf(request)
    const waiting = this.#unsent.get(key)
    if (waiting !== undefined) return waiting
    // `forget` may run before `read` returns (a statement sent at once): then the page is never shared.
    const shared: { page?: Promise<PlantPage>, sent?: true } = {}
    const forget = () => {
      shared.sent = true
      if (shared.page !== undefined && this.#unsent.get(key) === shared.page) this.#unsent.delete(key)
    }
    const page = read(forget)
    if (shared.sent === undefined) {
      shared.page = page
      this.#unsent.set(key, page)
      // A read that fails before its statement is sent (no connection) is not shared any longer either.
      page.then(forget, forget)
    }
    return page
  }
}

function keyOf ({ after, limit, tag, lines }: PageRequest): string {
  // The tag last: whatever it holds, the key names one request.
  return `${limit},${lines === true ? 'l' : 'j'},${after ?? ''},${tag === undefined ? '*' : `=${tag}`}`
}
