import { describe, expect, it } from 'vitest'
import { StoreUnavailableError } from '../../../src/store/plant-store.js'
import { asStoreError, mustDropConnection } from '../../../src/store/postgres/transactions.js'

/** An error as node-postgres reports one the server sent: a message and its SQLSTATE. */
const serverError = (code: string) => Object.assign(new Error(`server said ${code}`), { code })

describe('PostgreSQL errors as the store reports them', () => {
  it.each([
    ['08006', 'connection failure'],
    ['25006', 'read_only_sql_transaction: a standby or a read-only database'],
    ['40001', 'serialization_failure'],
    ['40P01', 'deadlock_detected'],
    ['53100', 'disk_full'],
    ['53300', 'too_many_connections'],
    ['55P03', 'lock_not_available'],
    ['57014', 'query_canceled: statement_timeout'],
    ['57P01', 'admin_shutdown']
  ])('makes SQLSTATE %s (%s) a StoreUnavailableError: a 503 with Retry-After', (code) => {
    const error = serverError(code)
    const reported = asStoreError(error)
    expect(reported).toBeInstanceOf(StoreUnavailableError)
    expect((reported as Error).cause).toBe(error)
  })

  it.each(['23505', '22P02', '42P01', '0A000'])('keeps SQLSTATE %s as it is: a fault, not an outage', (code) => {
    const error = serverError(code)
    expect(asStoreError(error)).toBe(error)
  })

  it('makes an error without a SQLSTATE (refused, reset, the client\'s read timeout) a StoreUnavailableError naming it', () => {
    const reported = asStoreError(new Error('Query read timeout'))
    expect(reported).toBeInstanceOf(StoreUnavailableError)
    expect((reported as Error).message).toBe('PostgreSQL is unavailable (Query read timeout)')
  })

  it.each([
    [new Error('Query read timeout'), true],
    [new Error('Connection terminated unexpectedly'), true],
    [serverError('08006'), true],
    [serverError('57P01'), true],
    [serverError('25006'), true],
    [serverError('57014'), false],
    [serverError('40001'), false],
    [serverError('23505'), false]
  ])('drops the connection after %s: %s', (error, dropped) => {
    expect(mustDropConnection(error)).toBe(dropped)
  })
})
