/** Printable ASCII but `"` and `\`: such text is its own JSON string body, as most names, ids and paths are. */
const NEEDS_NO_ESCAPING = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/** Whether `text` is its own JSON string body: `"${text}"` is its `JSON.stringify`. */
export function needsNoEscaping (text: string): boolean {
  return NEEDS_NO_ESCAPING.test(text)
}

/** `JSON.stringify` of a string, at a fraction of its cost for the common text that needs no escaping. */
export function jsonString (text: string): string {
  return needsNoEscaping(text) ? `"${text}"` : JSON.stringify(text)
}
