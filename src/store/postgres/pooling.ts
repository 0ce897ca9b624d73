/**
 * What stands between the service and PostgreSQL (`DATABASE_POOLING`): nothing (`direct`), a pooler
 * that gives each client connection one server connection for its life (`session`: PgBouncer's
 * `pool_mode = session`), or one that lends a server connection for one transaction at a time
 * (`transaction`: PgBouncer's `pool_mode = transaction`). Apart from pool.ts, so that reading the
 * configuration does not load the PostgreSQL driver.
 */
export const DATABASE_POOLING_MODES = ['direct', 'session', 'transaction'] as const
export type DatabasePooling = typeof DATABASE_POOLING_MODES[number]
