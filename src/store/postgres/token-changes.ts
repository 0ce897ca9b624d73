import type pg from 'pg'
import { ChannelListener } from './channel-listener.js'

/** The channel on which every token change is announced, in the transaction that makes it. */
const TOKEN_CHANNEL = 'plantstore_access_tokens'

/** Advances the revision and notifies listening instances; both take effect when the transaction commits. */
export async function announceTokenChange (client: pg.PoolClient): Promise<void> {
  await client.query('UPDATE access_token_revision SET revision = revision + 1 WHERE singleton = 1')
  await client.query('SELECT pg_notify($1, \'\')', [TOKEN_CHANNEL])
}

/** The token-change notifications of every instance, on a connection of their own. */
export class TokenChangeListener extends ChannelListener {
  constructor (connectionString: string, connectTimeoutMs: number) {
    super(connectionString, connectTimeoutMs, TOKEN_CHANNEL, 'plantstore-token-listener')
  }
}
