/**
 * Text without `"`, `\`, control characters (U+0000 to U+001F) and surrogates: `JSON.stringify` escapes
 * nothing else (not DEL, not U+2028), so such text is its own JSON string body, as most names, ids and
 * paths are, accented or not. (An astral character, a surrogate pair, takes the slow path, as a lone
 * surrogate must.)
 */
// eslint-disable-next-line no-control-regex -- the control characters are what must be escaped
const NEEDS_NO_ESCAPING = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/** Whether `text` is its own JSON string body: `"${text}"` is its `JSON.stringify`. */
export function needsNoEscaping (text: string): boolean {
  return NEEDS_NO_ESCAPING.test(text)
}

/** `JSON.stringify` of a string, at a fraction of its cost for the common text that needs no escaping. */
export function jsonString (text: string): string {
  return needsNoEscaping(text) ? `"${text}"` : JSON.stringify(text)
}
