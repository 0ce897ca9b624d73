import type { SqliteDatabase } from './driver.js'
import { unlessTransient } from './transient-errors.js'
import type { AccessTokenRecord, AccessTokenStore, VerifiableAccessToken } from '../access-token-store.js'
import { scopesOfText, scopesText } from '../scopes.js'

interface TokenRow {
  readonly id: string
  readonly name: string
  readonly scopes: string
  readonly created_at: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
}

const TOKEN_COLUMNS = 'id, name, scopes, created_at, expires_at, revoked_at'

/**
 * Tokens live in the same file, written on this thread's connection (synchronous=FULL, so a create or a
 * revoke is on disk when it resolves); they are rare enough not to need the writer thread. Times are
 * stored as `toISOString()` text, which sorts in time order.
 */
export function sqliteTokenStore (db: SqliteDatabase): AccessTokenStore {
  const selectAll = db.prepare<[], TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at DESC, id DESC`)
  const selectVerifiable = db.prepare<[], TokenRow & { sha256: Buffer }>(
    `SELECT ${TOKEN_COLUMNS}, sha256 FROM access_tokens WHERE revoked_at IS NULL`)
  const selectOne = db.prepare<[string], TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE id = ?`)
  const selectRevision = db.prepare<[], bigint>('SELECT revision FROM access_token_revision WHERE singleton = 1').pluck(true)
  const selectLiveName = db.prepare<[string, string], number>(
    'SELECT 1 FROM access_tokens WHERE name = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)').pluck(true)
  const selectAny = db.prepare<[], number>('SELECT 1 FROM access_tokens LIMIT 1').pluck(true)
  const insert = db.prepare<[string, string, string, Buffer, string, string | null]>(
    'INSERT INTO access_tokens (id, name, scopes, sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
  const revoke = db.prepare<[string, string]>('UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL')
  const advanceRevision = db.prepare('UPDATE access_token_revision SET revision = revision + 1 WHERE singleton = 1')

  const store = (token: VerifiableAccessToken) => {
    insert.run(token.id, token.name, scopesText(token.scopes), token.digest, token.createdAt.toISOString(), token.expiresAt?.toISOString() ?? null)
    advanceRevision.run()
  }
  const create = db.transaction((token: VerifiableAccessToken) => {
    if (selectLiveName.get(token.name, token.createdAt.toISOString()) !== undefined) return 'name-taken' as const
    store(token)
    return 'created' as const
  })
  const createInitialAdmin = db.transaction((token: VerifiableAccessToken) => {
    if (selectAny.get() !== undefined) return false
    store(token)
    return true
  })
  const revokeToken = db.transaction((id: string, at: Date) => {
    if (revoke.run(at.toISOString(), id).changes === 1) advanceRevision.run()
    const row = selectOne.get(id)
    return row === undefined ? undefined : tokenOfRow(row)
  })

  return {
    async list () {
      return unlessTransient(() => selectAll.all()).map(tokenOfRow)
    },
    async listVerifiable () {
      return unlessTransient(() => selectVerifiable.all()).map((row) => ({ ...tokenOfRow(row), digest: row.sha256 }))
    },
    async revision () {
      return String(unlessTransient(() => selectRevision.get()))
    },
    async create (token) {
      return unlessTransient(() => create.immediate(token))
    },
    async revoke (id, at) {
      return unlessTransient(() => revokeToken.immediate(id, at))
    },
    async createInitialAdmin (token) {
      return unlessTransient(() => createInitialAdmin.immediate(token))
    }
  }
}

function tokenOfRow (row: TokenRow): AccessTokenRecord {
  return {
    id: row.id,
    name: row.name,
    scopes: scopesOfText(row.scopes),
    createdAt: new Date(row.created_at),
    ...(row.expires_at === null ? {} : { expiresAt: new Date(row.expires_at) }),
    ...(row.revoked_at === null ? {} : { revokedAt: new Date(row.revoked_at) })
  }
}
