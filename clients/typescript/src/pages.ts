import { nextLink } from './link-header.js'
import { arrayOf } from './results.js'
import type { Query, Transport } from './transport.js'

/**
 * The pages of a listing, first to last: each page's `Link: rel="next"` names the next one. Its query is
 * taken, and sent to the same path under the client's base URL, so a proxy's path prefix is kept.
 */
export async function * pagesOf (transport: Transport, path: string, query: Query, signal?: AbortSignal): AsyncGenerator<readonly unknown[], void, undefined> {
  let search: Query | string = query
  for (;;) {
    const answer = await transport.send({ method: 'GET', path, query: search, repeatable: true, signal })
    yield arrayOf(answer.body, `a page of ${path}`)
    const next = nextLink(answer.headers.get('link'))
    if (next === undefined) return
    search = new URL(next, answer.url).search
  }
}
