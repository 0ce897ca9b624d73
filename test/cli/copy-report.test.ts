import { describe, expect, it } from 'vitest'
import { timeAndRate } from '../../src/cli/copy.js'

/** The time and rate on the line a copy ends with (its whole line: test/transfer/copy.test.ts). */
describe('plantstore copy: how long it took, and how fast', () => {
  it('When a copy takes under a second, Then its time is in milliseconds and no rate is given', () => {
    expect(timeAndRate(34.4, 12)).toBe('34 ms')
    expect(timeAndRate(999.4, 100_000)).toBe('999 ms')
    expect(timeAndRate(0.2, 0)).toBe('1 ms')
  })

  it('When it takes a second or more, Then its time is in seconds to the tenth, with the plants it copied per second', () => {
    expect(timeAndRate(999.6, 12)).toBe('1.0 s (12 plants/s)')
    expect(timeAndRate(5_912, 1_000_000)).toBe('5.9 s (169147 plants/s)')
  })

  it('When it copied no plant, Then no rate is given', () => {
    expect(timeAndRate(2_500, 0)).toBe('2.5 s')
  })
})
