import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { JsonSyntaxError, parseExactJson } from '../src/exact-json.js'

/** A member whose 16 digits send the whole text down the exact path. */
const EXACT_PATH = '"force":1234567890123456'

/** Whether a value holds an integer JSON.parse cannot keep exact (the exact path reads it as a bigint). */
function holdsUnsafeInteger (value: unknown): boolean {
  if (typeof value === 'number') return Number.isInteger(value) && !Number.isSafeInteger(value)
  if (typeof value !== 'object' || value === null) return false
  return Object.values(value).some(holdsUnsafeInteger)
}

describe('parseExactJson', () => {
  it('given any JSON document on the exact path, reads every other value as JSON.parse does', () => {
    fc.assert(fc.property(fc.dictionary(fc.string({ unit: 'binary' }), fc.jsonValue({ maxDepth: 3 })), (members) => {
      fc.pre(!holdsUnsafeInteger(members))
      const text = JSON.stringify(members)
      // (Keys that could reach a prototype are dropped, unlike JSON.parse: other tests hold that rule.)
      fc.pre(!text.includes('"__proto__"') && !text.includes('"constructor"'))
      const exact = parseExactJson(`{${EXACT_PATH}${text === '{}' ? '' : `,${text.slice(1, -1)}`}}`) as Record<string, unknown>
      const { force, ...rest } = exact
      const expected = JSON.parse(text) as Record<string, unknown>
      if (Object.hasOwn(expected, 'force')) return
      expect(force).toBe(1234567890123456)
      expect(rest).toEqual(expected)
    }), { numRuns: 300 })
  })

  it('given integer literals at every length around the safe range, keeps each one exact', () => {
    const read = (literal: string) => (parseExactJson(`{${EXACT_PATH},"n":${literal}}`) as { n: unknown }).n
    expect(read('123456789012345')).toBe(123456789012345)
    expect(read('-12345678901234')).toBe(-12345678901234)
    expect(read('9007199254740991')).toBe(9007199254740991)
    expect(read('-9007199254740991')).toBe(-9007199254740991)
    expect(read('9007199254740993')).toBe(9007199254740993n)
    expect(read('-9223372036854775808')).toBe(-9223372036854775808n)
    expect(read('1e2')).toBe(100)
    expect(read('12345678901234567e-1')).toBe(Number('1234567890123456.7'))
    expect(Object.is(read('-0'), -0)).toBe(true)
    expect(read('9'.repeat(40))).toBe(BigInt('9'.repeat(40)))
    expect(read('9'.repeat(41))).toBe(Infinity)
    expect(read(`-${'9'.repeat(41)}`)).toBe(-Infinity)
  })

  it('given strings with escapes or raw control characters, decodes the first and refuses the second', () => {
    expect(parseExactJson(`{${EXACT_PATH},"s":"a\\"b\\\\c\\u00e9\\n"}`)).toEqual({ force: 1234567890123456, s: 'a"b\\cé\n' })
    expect(() => parseExactJson(`{${EXACT_PATH},"s":"a\tb"}`)).toThrow(JsonSyntaxError)
    expect(() => parseExactJson(`{${EXACT_PATH},"s":"ab\\"}`)).toThrow(new JsonSyntaxError(`unterminated string at position ${EXACT_PATH.length + 6}`))
  })
})
