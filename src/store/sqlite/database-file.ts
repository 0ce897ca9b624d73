import { closeSync, openSync, readSync, rmSync, statSync } from 'node:fs'

/** The 16 bytes every SQLite database file starts with (https://sqlite.org/fileformat.html). */
const MAGIC = Buffer.from('SQLite format 3\0', 'latin1')
const HEADER_BYTES = 100

/** What a file's first 100 bytes say about it as a SQLite database. */
export type SqliteFileCheck =
  | { readonly kind: 'database', readonly bytes: number, readonly pageSize: number }
  | { readonly kind: 'missing' | 'not a file' | 'empty' | 'not sqlite' }
  /** A SQLite database shorter than its header says it is: `expected` bytes, `bytes` present. */
  | { readonly kind: 'truncated', readonly bytes: number, readonly expected: number }

/**
 * Reads the header of `path` without opening it as a database (opening a file SQLite takes for a store
 * in WAL mode creates files next to it). The header's own database size is trusted only when SQLite
 * marked it valid: the change counter (bytes 24–27) equal to bytes 92–95.
 */
export function checkSqliteFile (path: string): SqliteFileCheck {
  let bytes
  try {
    const stats = statSync(path)
    if (!stats.isFile()) return { kind: 'not a file' }
    bytes = stats.size
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' }
    throw error
  }
  if (bytes === 0) return { kind: 'empty' }
  const header = readStart(path, HEADER_BYTES)
  if (!header.subarray(0, MAGIC.length).equals(MAGIC.subarray(0, Math.min(header.length, MAGIC.length)))) return { kind: 'not sqlite' }
  if (header.length < HEADER_BYTES) return { kind: 'truncated', bytes, expected: HEADER_BYTES }
  const storedPageSize = header.readUInt16BE(16)
  const pageSize = storedPageSize === 1 ? 65536 : storedPageSize
  const pages = header.readUInt32BE(28)
  const sizeIsValid = pages > 0 && header.readUInt32BE(24) === header.readUInt32BE(92)
  if (sizeIsValid && bytes < pages * pageSize) return { kind: 'truncated', bytes, expected: pages * pageSize }
  return { kind: 'database', bytes, pageSize }
}

function readStart (path: string, length: number): Buffer {
  const descriptor = openSync(path, 'r')
  try {
    const buffer = Buffer.alloc(length)
    return buffer.subarray(0, readSync(descriptor, buffer, 0, length, 0))
  } finally {
    closeSync(descriptor)
  }
}

/** Removes the files SQLite keeps next to `path`, where there are any: its write-ahead log, its shared memory, its rollback journal. */
export function removeSidecars (path: string): void {
  for (const sidecar of [`${path}-wal`, `${path}-shm`, `${path}-journal`]) rmSync(sidecar, { force: true })
}

/** A write that failed for want of space: SQLite's SQLITE_FULL or the system's ENOSPC (or EDQUOT, a quota). */
export function isDiskFull (error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code
  return code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT'
}
