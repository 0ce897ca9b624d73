import { existsSync, statSync } from 'node:fs'
import { setPriority } from 'node:os'
import { dirname } from 'node:path'
import type { Config } from '../config.js'
import { AtomicFile } from '../transfer/atomic-file.js'
import { abandonStoreFile, describeContents, megabytes, parseFileCommand, type FileInvocation } from './backup-files.js'
import { defineCommand } from './command.js'
import { commandStoreFile } from './command-store.js'
import { unlessInterrupted } from './interruptions.js'
import { DATA_EXIT_CODES, ENVIRONMENT } from './usage.js'

export const BACKUP_USAGE = `Usage: plantstore backup FILE [--force]

Copies the SQLite store of DATABASE_URL to FILE while the service keeps running: one consistent
snapshot holding every write acknowledged before the backup began (plants, access tokens, webhook
subscriptions and their pending events, the change log with its head, the schema version), taken with
SQLite's online backup API. The store is only read. The backup runs at a low CPU priority and pauses
between its steps, so the service keeps most of its rate. FILE is written next to its final name under
a temporary one, flushed to disk, and only then renamed: an interrupted backup or a full disk never
leaves a partial FILE. FILE is a whole store, one file; restore it with plantstore restore. Tokens given
in PLANTSTORE_TOKENS are configuration, not part of the store: keep them apart. For PostgreSQL use
pg_dump (docs/guides/backups.md).

Options:
  --force        replace FILE if it exists (without it an existing FILE is refused and left untouched)
  -h, --help     show this help

${ENVIRONMENT}
${DATA_EXIT_CODES}`

/** The lowest CPU priority: where the backup and the service share cores, the service's writers come first. */
const BACKGROUND_NICENESS = 19

/**
 * `plantstore backup FILE [--force]`: a consistent copy of the store of DATABASE_URL, taken while its
 * service runs, written under a temporary name and renamed once it is complete and on disk. Prints one
 * line: what the backup holds, where, and how long it took.
 */
export const backup = defineCommand<FileInvocation<'backup'>>({
  name: 'backup',
  synopsis: 'backup FILE',
  summary: 'copy the running SQLite store to FILE, consistently',
  usage: BACKUP_USAGE,
  parse: (args) => parseFileCommand('backup', args, 'the file to write the backup to'),
  run: backUp
})

async function backUp (invocation: FileInvocation<'backup'>, config: Config): Promise<number> {
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
