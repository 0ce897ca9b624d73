import { existsSync, statSync } from 'node:fs'
import { setPriority } from 'node:os'
import { dirname } from 'node:path'
import type { Config } from '../config.js'
import { AtomicFile } from '../transfer/atomic-file.js'
import { abandonStoreFile, describeContents, megabytes } from './backup-files.js'
import { commandStoreFile } from './command-store.js'
import type { DataInvocation } from './data-command-line.js'
import { unlessInterrupted } from './interruptions.js'

/** The lowest CPU priority: where the backup and the service share cores, the service's writers come first. */
const BACKGROUND_NICENESS = 19

/**
 * `plantstore backup FILE [--force]`: a consistent copy of the store of DATABASE_URL, taken while its
 * service runs, written under a temporary name and renamed once it is complete and on disk. Prints one
 * line: what the backup holds, where, and how long it took.
 */
export async function runBackup (invocation: Extract<DataInvocation, { command: 'backup' }>, config: Config): Promise<number> {
  const store = await commandStoreFile(config, 'backup',
    'a memory store lives only inside its service, with no file to back up; export its plants with GET /admin/export')
  const folder = dirname(invocation.file)
  if (!existsSync(folder)) throw new Error(`cannot write the backup to ${invocation.file}: the folder ${folder} does not exist`)
  const file = new AtomicFile(invocation.file, invocation.force, 'backup')
  lowerPriority()
  const started = performance.now()
  const contents = await unlessInterrupted(() => abandonStoreFile(file, store), async () => {
    try {
      const contents = await store.backUp(file.temporaryPath)
      // An interruption that came during the last step is acted on before the file gets its name.
      await new Promise((resolve) => setImmediate(resolve))
      file.commit()
      return contents
    } catch (error) {
      abandonStoreFile(file, store)
      if (store.isDiskFull(error)) {
        throw new Error(`the disk is full: the backup of ${store.path} (${megabytes(statSync(store.path).size)}) did not fit in ${folder}; ` +
          `the partial copy was removed and ${invocation.file} was not written`, { cause: error })
      }
      throw error
    }
  })
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  process.stdout.write(`backed up ${describeContents(contents)} (schema version ${contents.schemaVersion}) to ${invocation.file} in ${seconds} s\n`)
  return 0
}

/** Lowers this thread's priority, the one that copies; where that is not allowed the backup runs as it is. */
function lowerPriority (): void {
  try {
    setPriority(BACKGROUND_NICENESS)
  } catch {}
}
