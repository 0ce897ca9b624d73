import type pg from 'pg'
import { SchemaTooNewError } from '../migration.js'
import { StoreUnavailableError } from '../plant-store.js'

/**
 * SQLSTATE classes and codes that mean "not now": connection exceptions (08), transaction rollback (40:
 * a serialization failure or deadlock that was not run again), insufficient resources (53: disk full,
 * too many connections), operator intervention (57: shutdown, cancel, statement_timeout), a lock not
 * had in time (55P03), and a server that takes no writes: 25006 read_only_sql_transaction (a standby, or
 * `default_transaction_read_only`).
 */
const TRANSIENT_SQLSTATE = /^(08|40|53|57)|^(25006|55P03)$/
/**
 * SQLSTATEs after which the connection itself is not worth keeping: its server went away or is shutting
 * down (08, 57P01–57P05), or it is a standby or read-only (25006), where a failover left the pool pointing
 * at the old primary. Dropping it lets the pool's next connection reach whatever the address names now.
 */
const DROP_CONNECTION_SQLSTATE = /^08|^57P0[1-5]$|^25006$/
const SQLSTATE = /^[0-9A-Z]{5}$/

function sqlStateOf (error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' && SQLSTATE.test(code) ? code : undefined
}

/**
 * Whether the connection that gave `error` must be destroyed rather than used again (for a ROLLBACK or by
 * another request): an error without a SQLSTATE is the connection's own (refused, reset, the client's
 * query_timeout on a silent server, terminated), and some SQLSTATEs mean the server is going or read-only.
 */
export function mustDropConnection (error: unknown): boolean {
  const code = sqlStateOf(error)
  return code === undefined || DROP_CONNECTION_SQLSTATE.test(code)
}

/** What the sub-stores throw: a StoreUnavailableError (a 503) for an outage, the error itself otherwise. */
export function asStoreError (error: unknown): unknown {
  if (error instanceof SchemaTooNewError || error instanceof StoreUnavailableError) return error
  if (error instanceof TypeError || error instanceof RangeError) return error
  const code = sqlStateOf(error)
  if (code === undefined || TRANSIENT_SQLSTATE.test(code)) {
    return new StoreUnavailableError(`PostgreSQL is unavailable (${code ?? (error as Error).message})`, { cause: error })
  }
  return error
}

/**
 * Resolves when the server behind `pool` takes writes; rejects with a StoreUnavailableError when it cannot
 * be reached or is read-only (in recovery, or `default_transaction_read_only`: either way the implicit
 * transaction is read-only). One statement on one connection, which is dropped unless it is writable.
 */
export async function checkWritable (pool: pg.Pool): Promise<void> {
  let client: pg.PoolClient
  try {
    client = await pool.connect()
  } catch (error) {
    throw asStoreError(error)
  }
  client.on('error', ignoreClientError)
  let release: Error | undefined
  try {
    const { rows } = await client.query<{ readOnly: string }>('SELECT current_setting(\'transaction_read_only\') AS "readOnly"')
    if (rows[0]?.readOnly !== 'off') {
      release = new Error('the server is read-only')
      throw new StoreUnavailableError('PostgreSQL takes no writes: the server is read-only (a standby, or default_transaction_read_only)')
    }
  } catch (error) {
    release ??= error instanceof Error ? error : new Error(String(error))
    const failure = asStoreError(error)
    throw failure instanceof StoreUnavailableError
      ? failure
      : new StoreUnavailableError(`PostgreSQL cannot be queried (${(error as Error).message})`, { cause: error })
  } finally {
    client.off('error', ignoreClientError)
    client.release(release)
  }
}

/** The connection dropping under a checked-out client is reported by its pending query; without a listener it would crash the process. */
const ignoreClientError = () => {}

/**
 * `work` in one transaction on one client of `pool`, opened with `begin`. After a failure the client is
 * rolled back and kept only when the server answered with an ordinary SQL error; a connection that timed
 * out, failed, or found a read-only server is destroyed at once, never asked for a ROLLBACK (which would
 * wait its own timeout on a silent server): the server rolls back a transaction whose connection closed.
 */
export async function inTransaction<T> (pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect()
  client.on('error', ignoreClientError)
  let release: Error | undefined
  try {
    await client.query(begin)
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (error) {
    release = error instanceof Error ? error : new Error(String(error))
    if (!mustDropConnection(error)) {
      try {
        await client.query('ROLLBACK')
        release = undefined
      } catch {
        // Kept as the failure above: the connection is destroyed.
      }
    }
    throw error
  } finally {
    client.off('error', ignoreClientError)
    client.release(release)
  }
}
