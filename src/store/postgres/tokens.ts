import type pg from 'pg'
import { scopesOfText, scopesText } from '../scopes.js'
import type { AccessTokenRecord, AccessTokenStore, VerifiableAccessToken } from '../access-token-store.js'
import { ADVISORY_LOCK_KEYS } from './advisory-locks.js'
import type { PostgresConnection } from './connection.js'
import { announceTokenChange, type TokenChangeListener } from './token-changes.js'

/**
 * READ COMMITTED whatever the server's default: a token transaction's statements after the advisory
 * lock must see what the transaction that held the lock committed.
 */
const BEGIN_READ_COMMITTED = 'BEGIN ISOLATION LEVEL READ COMMITTED'
const TOKEN_COLUMNS = 'id, name, scopes, created_at, expires_at, revoked_at'

interface TokenRow {
  readonly id: string
  readonly name: string
  readonly scopes: string
  readonly created_at: Date
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
}

/**
 * The access tokens; every change is announced to the other instances (token-changes.ts), which hear it
 * when `changes` is given (not behind a pooler in transaction mode) and otherwise at their revision poll.
 */
export function postgresTokenStore (connection: PostgresConnection, changes: TokenChangeListener | undefined): AccessTokenStore {
  const transaction = <T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> => connection.transaction(work, BEGIN_READ_COMMITTED)
  const insert = async (client: pg.PoolClient, token: VerifiableAccessToken) => {
    await client.query(
      'INSERT INTO access_tokens (id, name, scopes, sha256, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [token.id, token.name, scopesText(token.scopes), token.digest, token.createdAt, token.expiresAt ?? null])
    await announceTokenChange(client)
  }
  return {
    async list () {
      const { rows } = await connection.query<TokenRow>({ text: `SELECT ${TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at DESC, id DESC` })
      return rows.map(tokenOfRow)
    },
    async listVerifiable () {
      const { rows } = await connection.query<TokenRow & { sha256: Buffer }>({
        text: `SELECT ${TOKEN_COLUMNS}, sha256 FROM access_tokens WHERE revoked_at IS NULL`
      })
      return rows.map((row) => ({ ...tokenOfRow(row), digest: row.sha256 }))
    },
    async revision () {
      const { rows } = await connection.query<{ revision: bigint }>({ text: 'SELECT revision FROM access_token_revision WHERE singleton = 1' })
      return String(rows[0]?.revision)
    },
    create (token) {
      return transaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [ADVISORY_LOCK_KEYS.accessTokens])
        const { rowCount } = await client.query(
          'SELECT 1 FROM access_tokens WHERE name = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)',
          [token.name, token.createdAt])
        if (rowCount !== 0) return 'name-taken'
        await insert(client, token)
        return 'created'
      })
    },
    revoke (id, at) {
      return transaction(async (client) => {
        const { rowCount } = await client.query('UPDATE access_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [at, id])
        if (rowCount === 1) await announceTokenChange(client)
        const { rows } = await client.query<TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM access_tokens WHERE id = $1`, [id])
        return rows[0] === undefined ? undefined : tokenOfRow(rows[0])
      })
    },
    createInitialAdmin (token) {
      return transaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [ADVISORY_LOCK_KEYS.accessTokens])
        const { rowCount } = await client.query('SELECT 1 FROM access_tokens LIMIT 1')
        if (rowCount !== 0) return false
        await insert(client, token)
        return true
      })
    },
    ...(changes === undefined ? {} : { watch: (listener: () => void) => changes.add(listener) })
  }
}

function tokenOfRow (row: TokenRow): AccessTokenRecord {
  return {
    id: row.id,
    name: row.name,
    scopes: scopesOfText(row.scopes),
    createdAt: row.created_at,
    ...(row.expires_at === null ? {} : { expiresAt: row.expires_at }),
    ...(row.revoked_at === null ? {} : { revokedAt: row.revoked_at })
  }
}
