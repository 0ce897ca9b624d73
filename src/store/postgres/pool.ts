import pg from 'pg'
import type { DatabasePooling } from './pooling.js'

export interface PostgresPoolOptions {
  /** Connections this instance may hold; instances × poolSize must stay below max_connections. */
  readonly poolSize: number
  /** How long to wait for a connection (new or from the pool) before the request gets a 503. */
  readonly connectTimeoutMs: number
  /** Server-side statement_timeout; the client gives up a second later if the server is silent. */
  readonly statementTimeoutMs: number
  /** What pools in front (pooling.ts); `direct` when absent. */
  readonly pooling?: DatabasePooling
}

/**
 * The pool and how its work must be bounded. No setting goes as a startup parameter (PgBouncer
 * refuses those it does not know, `statement_timeout` among them): the statement timeout is set on
 * each new connection (`direct`, `session`), or inside each transaction with `SET LOCAL`
 * (`transaction`, where a session setting would stay on a server connection other clients borrow next).
 */
export interface PostgresPool {
  readonly pool: pg.Pool
  /** `begin` (a `BEGIN …` statement) followed by whatever the transaction must set for itself. */
  readonly beginBounded: (begin: string) => string
  /**
   * Whether a lone statement must run in a transaction of its own to be bounded (`transaction`):
   * outside one it has no timeout the pooler lets it keep.
   */
  readonly boundsLoneStatements: boolean
  /** Whether a connection may stay in `LISTEN`: not when the pooler lends it to others between transactions. */
  readonly canListen: boolean
}

const INT8_OID = 20
/** The type parsers of every plantstore connection: BIGINT to `bigint`, never through a double. */
export const BIGINT_AS_BIGINT: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (text: string) => BigInt(text)
      : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser
}

/** A node-postgres pool for the pooling mode: see PostgresPool. */
export function createPostgresPool (connectionString: string, options: PostgresPoolOptions): PostgresPool {
  const pooling = options.pooling ?? 'direct'
  const sessionTimeout = `SET statement_timeout = ${options.statementTimeoutMs}`
  const transactionTimeout = `SET LOCAL statement_timeout = ${options.statementTimeoutMs}`
  const perTransaction = pooling === 'transaction'
  const pool = new pg.Pool({
    connectionString,
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    query_timeout: options.statementTimeoutMs + 1000,
    application_name: 'plantstore',
    keepAlive: true,
    types: BIGINT_AS_BIGINT,
    ...(perTransaction
      ? { Client: UnnamedStatementClient }
      // A connection whose SET fails is ended and its caller gets the error, as if it could not connect.
      : { onConnect: async (client: pg.ClientBase) => { await client.query(sessionTimeout) } })
  })
  return {
    pool,
    beginBounded: perTransaction ? (begin) => `${begin}; ${transactionTimeout}` : (begin) => begin,
    boundsLoneStatements: perTransaction,
    canListen: !perTransaction
  }
}

/**
 * A client that prepares no statement under a name: a pooler in transaction mode (PgBouncer before
 * 1.21, or without `max_prepared_statements`) would run the next use of the name on a server
 * connection that never saw it. Each statement is parsed again instead, as an unnamed one.
 */
class UnnamedStatementClient extends pg.Client {
  override query (...args: unknown[]): never {
    const [config] = args
    if (config instanceof pg.Query) {
      // A query object of plantstore's own (plant-documents-query.ts), made for this one run.
      (config as { name?: string | undefined }).name = undefined
    } else if (typeof config === 'object' && config !== null && 'name' in config && typeof config.name === 'string') {
      args[0] = { ...config, name: undefined }
    }
    return (super.query as (...args: unknown[]) => never)(...args)
  }
}
