import type { Config } from '../config.js'
import { openStore, openStoreTransfer } from '../store/open-store.js'
import type { PlantStore } from '../store/plant-store.js'
import type { StoreFile } from '../store/store-transfer.js'

/**
 * The one place the commands open the store of DATABASE_URL. A memory store lives only inside its
 * service, so a command cannot reach it: each command refuses it with its own `memoryRefusal`, which
 * says so and what to do instead.
 */

/** Opens the store for a command, runs `work` on it and closes it. */
export async function withCommandStore<T> (config: Config, memoryRefusal: string, work: (store: PlantStore) => Promise<T>): Promise<T> {
  refuseMemory(config, memoryRefusal)
  const store = await openStore(config.databaseUrl, config.database)
  try {
    return await work(store)
  } finally {
    // Closing cannot undo what was committed; a failure to close must not hide the command's outcome.
    await store.close().catch(() => {})
  }
}

/** The store as the one file `command` works on; a backend whose store is not one file is refused, saying what to use instead. */
export async function commandStoreFile (config: Config, command: 'backup' | 'restore', memoryRefusal: string): Promise<StoreFile> {
  refuseMemory(config, memoryRefusal)
  return (await openStoreTransfer(config.databaseUrl)).file(command)
}

function refuseMemory (config: Config, memoryRefusal: string): void {
  if (config.databaseUrl === 'memory:') throw new Error(`DATABASE_URL is "memory:": ${memoryRefusal}`)
}
