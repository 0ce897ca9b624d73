import { isLive, newestFirst, type AccessTokenStore, type VerifiableAccessToken } from '../access-token-store.js'

export function memoryTokenStore (): AccessTokenStore {
  const tokens = new Map<string, VerifiableAccessToken>()
  let revision = 0
  const withoutDigest = ({ digest: _digest, ...record }: VerifiableAccessToken) => record
  return {
    async list () {
      return [...tokens.values()].reverse().map(withoutDigest).sort(newestFirst)
    },
    async listVerifiable () {
      return [...tokens.values()].filter((token) => token.revokedAt === undefined)
    },
    async revision () {
      return String(revision)
    },
    async create (token) {
      for (const stored of tokens.values()) {
        if (stored.name === token.name && isLive(stored, token.createdAt)) return 'name-taken'
      }
      tokens.set(token.id, token)
      revision++
      return 'created'
    },
    async revoke (id, at) {
      const stored = tokens.get(id)
      if (stored === undefined) return undefined
      if (stored.revokedAt === undefined) {
        tokens.set(id, { ...stored, revokedAt: at })
        revision++
      }
      return withoutDigest(tokens.get(id) as VerifiableAccessToken)
    },
    async createInitialAdmin (token) {
      if (tokens.size > 0) return false
      tokens.set(token.id, token)
      revision++
      return true
    }
  }
}
