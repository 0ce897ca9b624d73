import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'

/**
 * A file written under a temporary name next to its final one and given that name only once it is
 * complete and on disk, so a crash, a full disk or an interruption never leaves a partial file under
 * the final name. The temporary name starts with a dot and says what it is: `.NAME.partial-PID-RANDOM`.
 */
export class AtomicFile {
  readonly temporaryPath: string
  private settled = false

  /** Refuses (throws) when `path` exists and `force` is not set: the existing file is left untouched. */
  constructor (readonly path: string, private readonly force: boolean, what: string) {
    if (!force && existsSync(path)) throw new Error(`${path} exists; ${what} will not replace it without --force`)
    this.temporaryPath = join(dirname(path), `.${basename(path)}.partial-${process.pid}-${randomBytes(4).toString('hex')}`)
  }

  /**
   * Flushes the temporary file to disk and gives it the final name, then flushes the folder so the name
   * survives a crash too. Without `force` the final name is taken with a hard link, which fails instead
   * of replacing a file that appeared meanwhile.
   */
  commit (): void {
    syncPath(this.temporaryPath, 'r+')
    if (this.force) {
      renameSync(this.temporaryPath, this.path)
    } else {
      try {
        linkSync(this.temporaryPath, this.path)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new Error(`${this.path} appeared while it was being written; it was left untouched`, { cause: error })
        throw error
      }
      rmSync(this.temporaryPath)
    }
    this.settled = true
    syncPath(dirname(this.path), 'r')
  }

  /** Removes the temporary file, if any; the final name is untouched. Safe to call more than once. */
  abandon (): void {
    if (this.settled) return
    this.settled = true
    rmSync(this.temporaryPath, { force: true })
  }
}

function syncPath (path: string, flags: 'r' | 'r+'): void {
  const descriptor = openSync(path, flags)
  try {
    fsyncSync(descriptor)
  } finally {
    closeSync(descriptor)
  }
}
