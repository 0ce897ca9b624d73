/** The target of the `rel="next"` link of a `Link` header (RFC 8288), as written; undefined when there is none. */
export function nextLink (header: string | null): string | undefined {
  if (header === null) return undefined
  for (const match of header.matchAll(/<([^>]*)>([^,<]*)/g)) {
    const relations = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))/i.exec(match[2] ?? '')
    const names = (relations?.[1] ?? relations?.[2] ?? '').toLowerCase().split(/\s+/)
    if (names.includes('next')) return match[1]
  }
  return undefined
}
