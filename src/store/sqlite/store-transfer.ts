import { existsSync, realpathSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { backUpSqliteStore } from './backup.js'
import { sqliteCopyTarget } from './copy-target.js'
import { isDiskFull, removeSidecars } from './database-file.js'
import { backupFileProblem, prepareRestore } from './restore.js'
import { openSqliteSnapshot } from './store-rows.js'
import { replaceUnusedStore } from './store-swap.js'
import type { StoreFile, StoreTransfer } from '../store-transfer.js'

/** What moves a SQLite store: it is one file, backed up and restored as one; and either end of a copy. */
export function sqliteStoreTransfer (file: string): StoreTransfer {
  const storeFile: StoreFile = {
    path: file,
    backUp: (copyPath) => backUpSqliteStore(file, copyPath),
    backupProblem: backupFileProblem,
    prepareRestore,
    replace: (rename) => { replaceUnusedStore(file, rename) },
    removeSidecars,
    isDiskFull
  }
  return {
    location: { shown: `sqlite:${file}`, identity: `sqlite:${realPath(file)}`, secrets: [] },
    file: () => storeFile,
    async openCopySource () {
      if (!existsSync(file)) throw new Error('no such file: give the path of an existing store (nothing was created)')
      return openSqliteSnapshot(file)
    },
    copyTarget: () => sqliteCopyTarget(file)
  }
}

/** The file's real path, or for one not made yet its real folder's path joined with its name. */
function realPath (file: string): string {
  try {
    return realpathSync(file)
  } catch {
    try {
      return join(realpathSync(dirname(file)), basename(file))
    } catch {
      return resolve(file)
    }
  }
}
