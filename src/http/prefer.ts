/**
 * Whether a request's `Prefer` header (RFC 7240) asks for `count=exact`. Preferences are separated by
 * commas (and several headers by the same, as Node joins them), each a name, an optional `=value` (a
 * token or a quoted string) and parameters after `;`. Names and values compare without case; other
 * preferences are ignored.
 */
export function prefersExactCount (header: string | string[] | undefined): boolean {
  if (header === undefined) return false
  for (const preference of (Array.isArray(header) ? header.join(',') : header).split(',')) {
    const [nameAndValue] = preference.split(';')
    const equals = nameAndValue?.indexOf('=') ?? -1
    if (nameAndValue === undefined || equals === -1) continue
    const name = nameAndValue.slice(0, equals).trim().toLowerCase()
    const value = nameAndValue.slice(equals + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase()
    if (name === 'count' && value === 'exact') return true
  }
  return false
}
