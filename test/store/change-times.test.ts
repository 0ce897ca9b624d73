import { describe, expect, it } from 'vitest'
import { isoTime } from '../../src/store/change-document.js'

describe('the commit time of a change document (isoTime)', () => {
  it('writes what toISOString writes, for times in one minute, across minutes, days and years, and out of four-digit years', () => {
    const edges = [
      0, 1, 9, 10, 99, 100, 999, 1000, 59_999, 60_000, 86_399_999, 86_400_000, 951_782_399_999, 951_782_400_000,
      1_764_300_000_123, 253_402_300_799_999, 253_402_300_800_000, -1, -62_167_219_200_000, 8.64e15
    ]
    const inOneMinute = Array.from({ length: 200 }, (_, index) => 1_764_300_000_000 + index * 173)
    const spread = Array.from({ length: 20_000 }, (_, index) => Math.floor(((index * 2_654_435_761) % 4_294_967_296) / 4_294_967_296 * 253_402_300_800_000))
    for (const ms of [...edges, ...inOneMinute, ...spread, ...inOneMinute.toReversed()]) {
      expect(isoTime(ms), String(ms)).toBe(new Date(ms).toISOString())
    }
  })
})
