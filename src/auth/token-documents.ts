import type { AccessTokenRecord } from '../store/access-token-store.js'
import type { TokenView } from './token-registry.js'

/**
 * Tokens as JSON documents: the shapes of `/admin/tokens` (schemas.ts `CreatedAccessToken` without its
 * `token`, and `AccessToken`), which `plantstore tokens … --json` prints too, so scripts read both alike.
 */
export function tokenRecordDocument (token: AccessTokenRecord) {
  return {
    id: token.id,
    name: token.name,
    scopes: [...token.scopes],
    createdAt: token.createdAt.toISOString(),
    ...(token.expiresAt === undefined ? {} : { expiresAt: token.expiresAt.toISOString() })
  }
}

export function tokenViewDocument (token: TokenView) {
  return {
    ...tokenRecordDocument(token),
    source: token.source,
    ...(token.revokedAt === undefined ? {} : { revokedAt: token.revokedAt.toISOString() })
  }
}
