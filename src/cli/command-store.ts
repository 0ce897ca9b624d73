import type { Config } from '../config.js'
import { openStore } from '../store/open-store.js'
import type { PlantStore } from '../store/plant-store.js'

/**
 * Opens the store of DATABASE_URL for a command, runs `work` on it and closes it. A memory store lives
 * only inside its service, so a command cannot reach it: that is refused with `memoryRefusal`, which
 * says so and what to do instead.
 */
export async function withCommandStore<T> (config: Config, memoryRefusal: string, work: (store: PlantStore) => Promise<T>): Promise<T> {
  if (config.databaseUrl === 'memory:') throw new Error(`DATABASE_URL is "memory:": ${memoryRefusal}`)
  const store = await openStore(config.databaseUrl, config.database)
  try {
    return await work(store)
  } finally {
    // Closing cannot undo what was committed; a failure to close must not hide the command's outcome.
    await store.close().catch(() => {})
  }
}
