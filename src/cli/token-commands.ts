import { tokenRecordDocument, tokenViewDocument } from '../auth/token-documents.js'
import type { AccessTokenRegistry, TokenView } from '../auth/token-registry.js'
import { isLive, type AccessTokenRecord } from '../store/access-token-store.js'
import type { TokenInvocation } from './token-command-line.js'

/** The operation did not happen (exit code 1): a name taken, no such token, a token of the environment. */
export class CommandFailure extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'CommandFailure'
  }
}

/**
 * Runs a `plantstore tokens …` command with the registry the service uses, and resolves with all that
 * goes to stdout, which is written only when the command succeeded. The token of `create` is in that
 * text and nowhere else.
 */
export async function runTokenCommand (invocation: TokenInvocation, registry: AccessTokenRegistry, now = () => new Date()): Promise<string> {
  switch (invocation.command) {
    case 'tokens create': {
      const { name, scopes, expiresInMs, json } = invocation
      const expiresAt = expiresInMs === undefined ? undefined : new Date(now().getTime() + expiresInMs)
      const result = await registry.create(expiresAt === undefined ? { name, scopes } : { name, scopes, expiresAt })
      if (result.status === 'name-taken') {
        throw new CommandFailure(`a live access token is already named "${name}"; revoke it or choose another name`)
      }
      return json
        ? jsonDocument({ ...tokenRecordDocument(result.token), token: result.secret })
        : createdText(result.token, result.secret)
    }
    case 'tokens list': {
      const tokens = await registry.list()
      return invocation.json ? jsonDocument(tokens.map(tokenViewDocument)) : tokenTable(tokens, now())
    }
    case 'tokens revoke': {
      const found = await registry.find(invocation.idOrName)
      if (found === undefined) {
        throw new CommandFailure(`no access token has the id or the live name ${JSON.stringify(invocation.idOrName)}`)
      }
      const result = await registry.revoke(found.id)
      if (result.status === 'not-found') throw new CommandFailure(`no access token has the id ${JSON.stringify(found.id)}`)
      if (result.status === 'environment') {
        throw new CommandFailure(`the access token "${found.name}" comes from the environment and cannot be revoked here: ` +
          'remove it from the token file and send SIGHUP to the service, or from PLANTSTORE_TOKENS and restart the service')
      }
      const revoked: TokenView = { ...result.token, source: 'store' }
      if (invocation.json) return jsonDocument(tokenViewDocument(revoked))
      const when = timeText(revoked.revokedAt)
      return found.revokedAt === undefined
        ? `revoked the access token "${revoked.name}" (id ${revoked.id}) at ${when}\n`
        : `the access token "${revoked.name}" (id ${revoked.id}) was already revoked at ${when}\n`
    }
  }
}

function jsonDocument (value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`
}

/** An RFC 3339 UTC time to the second, as the table shows it. */
function timeText (time: Date | undefined): string {
  return time === undefined ? '-' : time.toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function createdText (token: AccessTokenRecord, secret: string): string {
  return [
    secret,
    '',
    'The access token above is shown only now: only its SHA-256 digest is stored. Keep it safe.',
    `  id       ${token.id}`,
    `  name     ${token.name}`,
    `  scopes   ${token.scopes.join(',')}`,
    `  expires  ${token.expiresAt === undefined ? 'never' : timeText(token.expiresAt)}`,
    ''
  ].join('\n')
}

function statusOf (token: TokenView, now: Date): string {
  if (token.revokedAt !== undefined) return `revoked ${timeText(token.revokedAt)}`
  return isLive(token, now) ? 'live' : 'expired'
}

/** One aligned row per token, newest first, under a header; the last column is left unpadded. */
function tokenTable (tokens: readonly TokenView[], now: Date): string {
  if (tokens.length === 0) return 'no access tokens: none in the store, none in PLANTSTORE_TOKENS\n'
  const rows = [
    ['ID', 'NAME', 'SCOPES', 'SOURCE', 'CREATED', 'EXPIRES', 'STATUS'],
    ...tokens.map((token) => [
      token.id, token.name, token.scopes.join(','), token.source, timeText(token.createdAt), timeText(token.expiresAt), statusOf(token, now)
    ])
  ]
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? []
  return rows.map((row) => row.map((cell, column) => column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)).join('  ')).join('\n') + '\n'
}
