/**
 * JSON.parse, except that no integer loses digits: a number whose exact value is an integer outside
 * ±(2^53 − 1) becomes a `bigint`. Objects follow JSON.parse semantics (the last repeated key wins),
 * except that the keys that could reach a prototype (`__proto__`, and `constructor` holding a
 * `prototype`) are dropped on the exact path; `parse`, which reads every text that cannot hold such a
 * number, decides what it does with them.
 *
 * Imports nothing and uses nothing of Node.js: the TypeScript client (clients/typescript) bundles this
 * module, with JSON.parse as `parse`, into browsers; the service passes secure-json-parse (exact-json.ts).
 *
 * Node 20's JSON.parse offers no access to a number's source text, and the parsers that keep big
 * integers either refuse repeated keys (lossless-json) or mis-read long decimals (json-bigint), so the
 * exact path is a small recursive-descent parser. It only runs when the text could hold such a number.
 */
export function parseExactJsonWith (text: string, parse: (text: string) => unknown): unknown {
  if (!mayHoldUnsafeNumber(text)) {
    // The exact path recurses and so has a depth limit; the same limit holds here, where it is cheap to
    // skip for texts too short to nest that deep.
    if (text.length > MAX_NESTING && nestsDeeperThanLimit(text)) throw new JsonSyntaxError(TOO_DEEP)
    try {
      return parse(text)
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error
      throw locateSyntaxError(text)
    }
  }
  return new ExactJsonParser(text).parseDocument()
}

/**
 * A number literal with at most 15 significant digits and no exponent is a double that keeps its exact
 * value and integrality. True when the text has a run of 16 digits and dots, or a digit followed by `e`
 * or `E` (so may a string that merely looks like one: that costs time, never correctness). One pass;
 * the equivalent regular expression retries the run from each of its digits.
 */
function mayHoldUnsafeNumber (text: string): boolean {
  let run = 0
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index)
    if ((char >= 0x30 && char <= 0x39) || char === 0x2e) {
      if (++run === 16) return true
    } else {
      if ((char === 0x65 || char === 0x45) && run > 0 && text.charCodeAt(index - 1) !== 0x2e) return true
      run = 0
    }
  }
  return false
}

export class JsonSyntaxError extends Error {}

/** Says where JSON.parse's refused text breaks, in the same words as the exact path. */
function locateSyntaxError (text: string): JsonSyntaxError {
  try {
    new ExactJsonParser(text).parseDocument()
  } catch (error) {
    if (error instanceof JsonSyntaxError) return error
  }
  return new JsonSyntaxError('syntax error')
}

const MAX_NESTING = 512
const TOO_DEEP = `nesting deeper than ${MAX_NESTING} levels`

function nestsDeeperThanLimit (text: string): boolean {
  let depth = 0
  let inString = false
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index)
    if (inString) {
      if (char === 0x5c) index++
      else if (char === 0x22) inString = false
    } else if (char === 0x22) {
      inString = true
    } else if (char === 0x5b || char === 0x7b) {
      if (++depth > MAX_NESTING) return true
    } else if (char === 0x5d || char === 0x7d) {
      depth--
    }
  }
  return false
}
const NUMBER_LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y
const NUMBER_PARTS = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)
// Integers with more digits than this are far outside int64; they need not be built exactly.
const MAX_EXACT_DIGITS = 40

/** A number literal without fraction or exponent: its value is its digits. */
const NOT_AN_INTEGER_LITERAL = /[.eE]/
/** Integer literals this short (sign included) are safe integers whose double is exact. */
const SAFE_LITERAL_LENGTH = 15

function exactNumber (literal: string): number | bigint {
  if (!NOT_AN_INTEGER_LITERAL.test(literal)) {
    if (literal.length <= SAFE_LITERAL_LENGTH) return Number(literal)
    if (literal.length <= MAX_EXACT_DIGITS) {
      const value = BigInt(literal)
      return value >= -MAX_SAFE && value <= MAX_SAFE ? Number(value) : value
    }
  }
  const [, sign = '', whole = '', fraction = '', exponentText = '0'] = NUMBER_PARTS.exec(literal) ?? []
  let digits = (whole + fraction).replace(/^0+/, '')
  let exponent = Number(exponentText) - fraction.length
  while (exponent < 0 && digits.endsWith('0')) {
    digits = digits.slice(0, -1)
    exponent++
  }
  if (digits === '') return sign === '-' ? -0 : 0
  if (exponent < 0) {
    const nearest = Number(literal)
    // The exact value is not an integer, but its nearest double may be: keep it out of every integer rule.
    return Number.isInteger(nearest) ? Number.NaN : nearest
  }
  if (digits.length + exponent > MAX_EXACT_DIGITS) return sign === '-' ? -Infinity : Infinity
  const value = BigInt(sign + digits) * 10n ** BigInt(exponent)
  return value >= -MAX_SAFE && value <= MAX_SAFE ? Number(value) : value
}

class ExactJsonParser {
  private position = 0

  constructor (private readonly text: string) {}

  parseDocument (): unknown {
    const value = this.parseValue(0)
    this.skipWhitespace()
    if (this.position !== this.text.length) this.fail('unexpected text after the JSON value')
    return value
  }

  private parseValue (depth: number): unknown {
    if (depth > MAX_NESTING) this.fail(TOO_DEEP)
    this.skipWhitespace()
    const char = this.text[this.position]
    switch (char) {
      case '{': return this.parseObject(depth)
      case '[': return this.parseArray(depth)
      case '"': return this.parseString()
      case 't': return this.parseLiteral('true', true)
      case 'f': return this.parseLiteral('false', false)
      case 'n': return this.parseLiteral('null', null)
      default: return this.parseNumber()
    }
  }

  private parseObject (depth: number): Record<string, unknown> {
    const object: Record<string, unknown> = {}
    this.parseItems('}', () => {
      this.skipWhitespace()
      if (this.text[this.position] !== '"') this.fail('expected a property name')
      const key = this.parseString()
      this.skipWhitespace()
      this.expect(':')
      const value = this.parseValue(depth + 1)
      if (!reachesAPrototype(key, value)) object[key] = value
    })
    return object
  }

  private parseArray (depth: number): unknown[] {
    const array: unknown[] = []
    this.parseItems(']', () => { array.push(this.parseValue(depth + 1)) })
    return array
  }

  /** The comma-separated members of an object or items of an array, from its opening character to `close`. */
  private parseItems (close: '}' | ']', parseItem: () => void): void {
    this.position++
    this.skipWhitespace()
    if (this.text[this.position] === close) {
      this.position++
      return
    }
    for (;;) {
      parseItem()
      this.skipWhitespace()
      if (this.text[this.position] !== ',') break
      this.position++
    }
    this.expect(close)
  }

  private parseString (): string {
    const { text } = this
    const start = this.position
    let end = start + 1
    // Without escapes and raw control characters, the string is the text between its quotes.
    let plain = true
    for (;;) {
      const code = text.charCodeAt(end)
      if (Number.isNaN(code)) this.fail('unterminated string')
      if (code === 0x22) break
      if (code === 0x5c) {
        plain = false
        end += 2
      } else {
        if (code < 0x20) plain = false
        end++
      }
    }
    this.position = end + 1
    if (plain) return text.slice(start + 1, end)
    try {
      // JSON.parse decodes the escapes and refuses raw control characters, exactly as on the fast path.
      return JSON.parse(this.text.slice(start, this.position)) as string
    } catch {
      this.position = start
      return this.fail('invalid string (a bad escape or a raw control character)')
    }
  }

  private parseNumber (): number | bigint {
    NUMBER_LITERAL.lastIndex = this.position
    const match = NUMBER_LITERAL.exec(this.text)
    if (match === null) this.fail('unexpected character')
    this.position += match[0].length
    return exactNumber(match[0])
  }

  private parseLiteral<T> (word: string, value: T): T {
    if (!this.text.startsWith(word, this.position)) this.fail('unexpected character')
    this.position += word.length
    return value
  }

  private expect (char: string): void {
    if (this.text[this.position] !== char) this.fail(`expected '${char}'`)
    this.position++
  }

  private skipWhitespace (): void {
    for (;;) {
      const char = this.text[this.position]
      if (char !== ' ' && char !== '\t' && char !== '\n' && char !== '\r') return
      this.position++
    }
  }

  private fail (reason: string): never {
    throw new JsonSyntaxError(`${reason} at position ${this.position}`)
  }
}

function reachesAPrototype (key: string, value: unknown): boolean {
  if (key === '__proto__') return true
  return key === 'constructor' && typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype')
}
