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

const { AccessTokenRegistry } = await import('../../src/auth/token-registry.js')
const { digestToken, parseTokenList } = await import('../../src/auth/tokens.js')
const { openMemoryStore } = await import('../../src/store/memory/store.js')

async function registryAccepting (...tokens: string[]) {
  const store = openMemoryStore()
  const registry = new AccessTokenRegistry(store.tokens, parseTokenList(tokens.join(',')))
  await registry.refresh()
  return registry
}

function countCallsFromNow (): void {
  timingSafeEqualSpy.calls.length = 0
  hashSpy.calls = 0
}

describe('Token comparison', () => {
  const secret = 'a-long-secret-token-0123456789'

  it.each([
    ['all but the last character right', `${secret.slice(0, -1)}x`],
    ['only the first character right', `a${'x'.repeat(secret.length - 1)}`],
    ['nothing right, another length', 'zz']
  ])('refuses %s after one digest, without comparing it with any token', async (_case, presented) => {
    const tokens = await registryAccepting('another-token', secret, 'a-third-token')
    countCallsFromNow()

    expect(tokens.identify(presented)).toBeUndefined()

    expect(hashSpy.calls).toBe(1)
    expect(timingSafeEqualSpy.calls).toHaveLength(0)
  })

  it('accepts the right token after one digest and one constant-time compare of 32-byte digests', async () => {
    const tokens = await registryAccepting('another-token', secret, 'a-third-token')
    countCallsFromNow()

    expect(tokens.identify(secret)?.name).toBe('environment-2')

    expect(hashSpy.calls).toBe(1)
    expect(timingSafeEqualSpy.calls).toHaveLength(1)
    const [left, right] = timingSafeEqualSpy.calls[0] ?? []
    expect([left?.length, right?.length]).toEqual([32, 32])
    expect(left?.equals(digestToken(secret))).toBe(true)
    expect(right?.equals(digestToken(secret))).toBe(true)
  })

  it('remembers an accepted token, so its next requests skip the digest and the compare', async () => {
    const tokens = await registryAccepting('another-token', secret)
    expect(tokens.identify(secret)).toBeDefined()
    countCallsFromNow()

    expect(tokens.identify(secret)).toBeDefined()

    expect(hashSpy.calls).toBe(0)
    expect(timingSafeEqualSpy.calls).toHaveLength(0)
  })

  it('never remembers a refused token: every try digests it again', async () => {
    const tokens = await registryAccepting('another-token', secret)
    expect(tokens.identify(secret)).toBeDefined()
    const wrong = `${secret.slice(0, -1)}x`

    for (let attempt = 0; attempt < 3; attempt++) {
      hashSpy.calls = 0

      expect(tokens.identify(wrong)).toBeUndefined()

      expect(hashSpy.calls).toBe(1)
    }
  })
})
