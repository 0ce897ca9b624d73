import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { jsonString, needsNoEscaping } from '../src/json-text.js'

/** Code units that JSON.stringify treats apart: quotes, backslashes, controls, DEL, line separators, surrogates. */
const SPECIAL = fc.constantFrom('"', '\\', '\u0000', '\u001f', ' ', '\u007f', '\u2028', '\u2029', '\ud800', '\udbff', '\udc00', '\udfff', 'é', 'ß', 'Д', '😀')

describe('jsonString', () => {
  it('writes every string as JSON.stringify does', () => {
    fc.assert(fc.property(fc.string({ unit: fc.oneof(SPECIAL, fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 })) }),
      (text) => { expect(jsonString(text)).toBe(JSON.stringify(text)) }), { numRuns: 20_000 })
  })

  it('writes every code unit as JSON.stringify does, and takes the fast path for all but quotes, backslashes, controls and surrogates', () => {
    const slow: number[] = []
    for (let code = 0; code <= 0xffff; code++) {
      const text = `a${String.fromCharCode(code)}b`
      expect(jsonString(text)).toBe(JSON.stringify(text))
      if (!needsNoEscaping(text)) slow.push(code)
    }
    expect(slow.length).toBe(2 + 0x20 + 0x800)
  })
})
