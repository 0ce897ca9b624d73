import { describe, expect, it, vi } from 'vitest'

const { timingSafeEqualSpy, hashSpy } = vi.hoisted(() => ({
  timingSafeEqualSpy: { calls: [] as Array<[Buffer, Buffer]> },
  hashSpy: { calls: 0 }
}))

vi.mock('node:crypto', async (importOriginal) => {
  const crypto = await importOriginal<typeof import('node:crypto')>()
  return {
    ...crypto,
    hash: (...args: Parameters<typeof crypto.hash>) => {
      hashSpy.calls++
      return crypto.hash(...args)
    },
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

  it('remembers an accepted token, so its next requests skip the digest and the compares', () => {
    const fresh = new AccessTokens([digestToken('another-token'), digestToken(secret)])
    expect(fresh.accepts(secret)).toBe(true)
    timingSafeEqualSpy.calls.length = 0
    hashSpy.calls = 0

    expect(fresh.accepts(secret)).toBe(true)

    expect(hashSpy.calls).toBe(0)
    expect(timingSafeEqualSpy.calls).toHaveLength(0)
  })

  it('never remembers a refused token: every try digests it and compares with every accepted digest', () => {
    const fresh = new AccessTokens([digestToken('another-token'), digestToken(secret)])
    expect(fresh.accepts(secret)).toBe(true)
    const wrong = `${secret.slice(0, -1)}x`

    for (let attempt = 0; attempt < 3; attempt++) {
      timingSafeEqualSpy.calls.length = 0
      hashSpy.calls = 0

      expect(fresh.accepts(wrong)).toBe(false)

      expect(hashSpy.calls).toBe(1)
      expect(timingSafeEqualSpy.calls).toHaveLength(2)
    }
  })
})
