import { describe, expect, it, vi } from 'vitest'

const { timingSafeEqualSpy } = vi.hoisted(() => ({ timingSafeEqualSpy: { calls: [] as Array<[Buffer, Buffer]> } }))

vi.mock('node:crypto', async (importOriginal) => {
  const crypto = await importOriginal<typeof import('node:crypto')>()
  return {
    ...crypto,
    timingSafeEqual: (a: Buffer, b: Buffer) => {
      timingSafeEqualSpy.calls.push([a, b])
      return crypto.timingSafeEqual(a, b)
    }
  }
})

const { AccessTokens, digestToken } = await import('../../src/auth/tokens.js')

describe('Token comparison', () => {
  const secret = 'a-long-secret-token-0123456789'
  const tokens = new AccessTokens([digestToken('another-token'), digestToken(secret), digestToken('a-third-token')])

  it.each([
    ['the right token', secret, true],
    ['all but the last character right', `${secret.slice(0, -1)}x`, false],
    ['only the first character right', `a${'x'.repeat(secret.length - 1)}`, false],
    ['nothing right, another length', 'zz', false]
  ])('does the same work for %s: one constant-time compare of 32-byte digests per accepted token', (_case, presented, accepted) => {
    timingSafeEqualSpy.calls.length = 0

    const result = tokens.accepts(presented)

    expect(result).toBe(accepted)
    expect(timingSafeEqualSpy.calls).toHaveLength(3)
    for (const [left, right] of timingSafeEqualSpy.calls) {
      expect([left.length, right.length]).toEqual([32, 32])
      expect(right.equals(digestToken(presented))).toBe(true)
      expect(left.includes(Buffer.from(secret))).toBe(false)
    }
  })
})
