import type { Config } from '../config.js'
import { openStore } from '../store/open-store.js'
import type { PlantStore } from '../store/plant-store.js'

/**
 * Opens the store of DATABASE_URL for a command, runs `work` on it and closes it. A memory store lives
 * only inside its service, so a command cannot reach it: that is refused with what to do instead.
 */
export async function withCommandStore<T> (config: Config, command: string, instead: string, work: (store: PlantStore) => Promise<T>): Promise<T> {
  if (config.databaseUrl === 'memory:') {
    throw new Error(`DATABASE_URL is "memory:": a memory store lives only inside the running service, so ${command} cannot reach it; ${instead}`)
  }
  const store = await openStore(config.databaseUrl, config.database)
  try {
    return await work(store)
  } finally {
    // Closing cannot undo what was committed; a failure to close must not hide the command's outcome.
    await store.close().catch(() => {})
  }
}
