/**
 * How plant names are searched and ordered, the same on every backend: the folded name a search matches
 * (computed here, in JavaScript, on every write, so that SQLite and PostgreSQL hold the same bytes), and
 * the order of names by Unicode code points (the order of their UTF-8 bytes, which SQLite's BINARY and
 * PostgreSQL's "C" collation compare).
 */

/** The folded form of a name or a search text: `q` matches a name when `foldName(name)` contains `foldName(q)`. */
export function foldName (text: string): string {
  return text.normalize('NFC').toUpperCase().toLowerCase()
}

/**
 * Compares two strings by code points. JavaScript's `<` compares UTF-16 units, which sorts the
 * surrogates of astral characters (U+10000 and up) below U+E000–U+FFFF; every other unit is in order.
 */
export function compareNames (a: string, b: string): number {
  if (a === b) return 0
  const length = Math.min(a.length, b.length)
  for (let index = 0; index < length; index++) {
    const left = a.charCodeAt(index)
    const right = b.charCodeAt(index)
    if (left !== right) return codePointRank(left) - codePointRank(right)
  }
  return a.length - b.length
}

/** A UTF-16 unit's place in code point order: surrogates (of astral characters) after U+FFFF. */
function codePointRank (unit: number): number {
  if (unit < 0xD800) return unit
  return unit < 0xE000 ? unit + 0x2000 : unit - 0x800
}
