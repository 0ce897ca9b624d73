/** The names of a query's parameters whose percent-encoding is not UTF-8 (validation answers 400 for them). */
export const MALFORMED_PARAMETERS = Symbol('plantstore.malformedQueryParameters')

export type ParsedQuery = Record<string, string | string[]> & { [MALFORMED_PARAMETERS]?: string[] }

/**
 * The query string as `application/x-www-form-urlencoded`, decoded strictly: Fastify's default parser
 * keeps a value it cannot decode as it was sent, so `tag=%FF` would ask for the tag "%FF", which
 * `tag=%25FF` names. Here such a parameter is reported instead, for validation to refuse after
 * authentication. A repeated name gives an array, which no parameter's schema accepts.
 */
export function parseQueryString (text: string): ParsedQuery {
  const query: ParsedQuery = Object.create(null)
  if (text.length === 0) return query
  for (const pair of text.split('&')) {
    if (pair === '') continue
    const separator = pair.indexOf('=')
    const name = decodeComponent(separator === -1 ? pair : pair.slice(0, separator))
    const value = decodeComponent(separator === -1 ? '' : pair.slice(separator + 1))
    if (name === undefined) continue
    if (value === undefined) {
      (query[MALFORMED_PARAMETERS] ??= []).push(name)
      continue
    }
    const earlier = query[name]
    query[name] = earlier === undefined ? value : [earlier, value].flat()
  }
  return query
}

function decodeComponent (text: string): string | undefined {
  const spaced = text.includes('+') ? text.replaceAll('+', ' ') : text
  if (!spaced.includes('%')) return spaced
  try {
    return decodeURIComponent(spaced)
  } catch {
    return undefined
  }
}

/** A request target without its query string. */
export function pathOf (url: string): string {
  const queryAt = url.indexOf('?')
  return queryAt === -1 ? url : url.slice(0, queryAt)
}

/**
 * A request target as log lines and traces show it: the text of a search (`q`) is what a user typed, and
 * is never recorded, valid or not.
 */
export function withoutSearchText (url: string): string {
  return url.includes('q=') ? url.replace(SEARCH_PARAMETER, '$1q=[redacted]') : url
}

const SEARCH_PARAMETER = /([?&])q=[^&]*/g
