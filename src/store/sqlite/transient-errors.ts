import { SqliteError } from './driver.js'
import { SqliteWriteError, WRITER_EXITED } from './writer.js'
import { StoreUnavailableError } from '../plant-store.js'

/** Error codes that mean "not now" rather than "never": the request may succeed when retried. */
const TRANSIENT_CODES = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|PROTOCOL)/

/** Runs a statement on this thread's connection; an error that means "not now" becomes a StoreUnavailableError. */
export function unlessTransient<T> (operation: () => T): T {
  try {
    return operation()
  } catch (error) {
    if (error instanceof SqliteError && TRANSIENT_CODES.test(error.code)) {
      throw new StoreUnavailableError(`SQLite is unavailable (${error.code})`, { cause: error })
    }
    throw error
  }
}

/** A writer thread's error that means "not now" (its exit among them) as a StoreUnavailableError; others as they are. */
export function asUnavailable (error: unknown): unknown {
  const code = error instanceof SqliteWriteError ? error.code : undefined
  if (code !== undefined && (TRANSIENT_CODES.test(code) || code === WRITER_EXITED)) {
    return new StoreUnavailableError(`SQLite is unavailable (${code})`, { cause: error })
  }
  return error
}
