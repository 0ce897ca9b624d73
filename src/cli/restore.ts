import { existsSync, mkdirSync, realpathSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Config } from '../config.js'
import { AtomicFile } from '../transfer/atomic-file.js'
import { abandonStoreFile, describeContents, megabytes, parseFileCommand, type FileInvocation } from './backup-files.js'
import { defineCommand } from './command.js'
import { commandStoreFile } from './command-store.js'
import { unlessInterrupted } from './interruptions.js'
import { DATA_EXIT_CODES, ENVIRONMENT } from './usage.js'

export const RESTORE_USAGE = `Usage: plantstore restore FILE [--force]

Makes the SQLite store of DATABASE_URL the store the backup FILE holds. FILE is checked first: a whole
SQLite file that passes PRAGMA quick_check, a plantstore store, of a schema version this release knows;
an older one is brought up to date. No process may have the store open: one that a running service
uses is refused (stop the service first). The restored store is prepared next to the store and takes
its name in one rename, after the old store's -wal and -shm files are removed: a failure leaves the
store as it was. A service started afterwards serves exactly the backed-up state.

Options:
  --force        replace a store that exists (without it an existing store is refused and left untouched)
  -h, --help     show this help

${ENVIRONMENT}
${DATA_EXIT_CODES}`

/**
 * `plantstore restore FILE [--force]`: makes the store of DATABASE_URL, which no process may have open,
 * the store the backup FILE holds, brought up to this release's schema. The backup is checked and
 * migrated in a copy next to the store, which then takes the store's name in one rename: a failure
 * leaves the store as it was.
 */
export const restore = defineCommand<FileInvocation<'restore'>>({
  name: 'restore',
  synopsis: 'restore FILE',
  summary: 'replace the SQLite store (no service running) with a backup',
  usage: RESTORE_USAGE,
  parse: (args) => parseFileCommand('restore', args, 'the backup file to restore'),
  run: restoreBackup
})

async function restoreBackup (invocation: FileInvocation<'restore'>, config: Config): Promise<number> {
  const store = await commandStoreFile(config, 'restore', 'restore writes a SQLite store; set DATABASE_URL to sqlite:PATH')
  const problem = store.backupProblem(invocation.file)
  if (problem !== undefined) throw new Error(problem)
  if (existsSync(store.path) && realpathSync(store.path) === realpathSync(invocation.file)) {
    throw new Error(`cannot restore ${invocation.file}: it is the store of DATABASE_URL itself`)
  }
  const file = new AtomicFile(store.path, invocation.force, 'restore')
  // The folder a service would make at its first start.
  mkdirSync(dirname(store.path), { recursive: true })
  const started = performance.now()
  const restored = await unlessInterrupted(() => abandonStoreFile(file, store), async () => {
    try {
      const prepared = store.prepareRestore(invocation.file, file.temporaryPath)
      // An interruption that came while the copy was prepared is acted on before the store is replaced.
      await new Promise((resolve) => setImmediate(resolve))
      store.replace(() => file.commit())
      return prepared
    } catch (error) {
      abandonStoreFile(file, store)
      if (store.isDiskFull(error)) {
        throw new Error(`the disk is full: the restored store (${megabytes(statSync(invocation.file).size)} or more) did not fit in ` +
          `${dirname(store.path)}; the partial copy was removed and ${store.path} was left as it was`, { cause: error })
      }
      throw error
    }
  })
  const { contents, backupVersion } = restored
  const version = backupVersion === contents.schemaVersion
    ? `schema version ${backupVersion}`
    : `schema version ${backupVersion}, brought up to ${contents.schemaVersion}`
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  process.stdout.write(`restored ${describeContents(contents)} (${version}) from ${invocation.file} into ${store.path} in ${seconds} s\n`)
  return 0
}
