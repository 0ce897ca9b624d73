import { existsSync, mkdirSync, realpathSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Config } from '../config.js'
import { AtomicFile } from '../transfer/atomic-file.js'
import { abandonSqliteFile, isDiskFull, megabytes } from '../transfer/sqlite-file.js'
import { backupFileProblem, prepareRestore } from '../transfer/sqlite-restore.js'
import { sqliteStorePathFor } from '../transfer/sqlite-store-url.js'
import { replaceUnusedStore } from '../transfer/store-swap.js'
import { describeContents } from '../transfer/store-contents.js'
import type { DataInvocation } from './data-command-line.js'
import { unlessInterrupted } from './interruptions.js'

/**
 * `plantstore restore FILE [--force]`: makes the SQLite store of DATABASE_URL, which no process may have
 * open, the store the backup FILE holds, brought up to this release's schema. The backup is checked and
 * migrated in a copy next to the store (transfer/sqlite-restore.ts), which then takes the store's name
 * in one rename (transfer/store-swap.ts): a failure leaves the store as it was.
 */
export async function runRestore (invocation: Extract<DataInvocation, { command: 'restore' }>, config: Config): Promise<number> {
  const storePath = sqliteStorePathFor('restore', config.databaseUrl)
  const problem = backupFileProblem(invocation.file)
  if (problem !== undefined) throw new Error(problem)
  if (existsSync(storePath) && realpathSync(storePath) === realpathSync(invocation.file)) {
    throw new Error(`cannot restore ${invocation.file}: it is the store of DATABASE_URL itself`)
  }
  const file = new AtomicFile(storePath, invocation.force, 'restore')
  // The folder a service would make at its first start.
  mkdirSync(dirname(storePath), { recursive: true })
  const started = performance.now()
  const restored = await unlessInterrupted(() => abandonSqliteFile(file), async () => {
    try {
      const prepared = prepareRestore(invocation.file, file.temporaryPath)
      // An interruption that came while the copy was prepared is acted on before the store is replaced.
      await new Promise((resolve) => setImmediate(resolve))
      replaceUnusedStore(storePath, file)
      return prepared
    } catch (error) {
      abandonSqliteFile(file)
      if (isDiskFull(error)) {
        throw new Error(`the disk is full: the restored store (${megabytes(statSync(invocation.file).size)} or more) did not fit in ` +
          `${dirname(storePath)}; the partial copy was removed and ${storePath} was left as it was`, { cause: error })
      }
      throw error
    }
  })
  const { contents, backupVersion } = restored
  const version = backupVersion === contents.schemaVersion
    ? `schema version ${backupVersion}`
    : `schema version ${backupVersion}, brought up to ${contents.schemaVersion}`
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  process.stdout.write(`restored ${describeContents(contents)} (${version}) from ${invocation.file} into ${storePath} in ${seconds} s\n`)
  return 0
}
