import type { SqliteDatabase, Statement } from './driver.js'
import { unlessTransient } from './transient-errors.js'
import { ReadBatch } from '../read-batch.js'
import type { PlantJson } from '../plant-document.js'
import type { PlantStore } from '../plant-store.js'
import { PLANT_DOCUMENT_SQL } from './plant-document-sql.js'
import { idOfDocument, PlantPages } from './plant-pages.js'
import { Searcher } from './searcher.js'

const MAX_READ_BATCH_SIZE = 500

export interface SqlitePlantReads extends Pick<PlantStore, 'get' | 'list' | 'count'> {
  /** Resolves once no batch of reads is under way; ends the search thread. */
  close (): Promise<void>
}

/**
 * The plant reads: one plant by id, batched with the others of its turn, and pages read from an index
 * range on this thread's connection; searches and counts, whose cost grows with what they match, on the
 * search thread's (searcher.ts), bounded by the statement timeout.
 */
export function sqlitePlantReads (
  db: SqliteDatabase,
  file: string,
  options: { readonly statementTimeoutMs: number, readonly onReadBatch: ((size: number) => void) | undefined }
): SqlitePlantReads {
  const selectPlants = db.prepare<[string]>(`SELECT ${PLANT_DOCUMENT_SQL} FROM plants WHERE id IN (SELECT value FROM json_each(?))`)
    .pluck(true) as unknown as Statement<[string], PlantJson>
  const pages = new PlantPages(db)
  const searcher = new Searcher(file, options.statementTimeoutMs)

  // The GETs of one event-loop turn share one statement: one read transaction and one pass through the
  // driver for all of them costs about a third of a statement each (bench/results/2026-11-23-1052-fixed-cost.md).
  const reads = new ReadBatch<bigint, PlantJson>(async (ids) => {
    const plants = unlessTransient(() => selectPlants.all(`[${ids.join(',')}]`))
    return new Map(plants.map((json) => [idOfDocument(json), json]))
  }, MAX_READ_BATCH_SIZE, options.onReadBatch)

  return {
    get (id) {
      return reads.read(id)
    },
    async list (request) {
      return request.q === undefined ? unlessTransient(() => pages.page(request)) : await searcher.page(request)
    },
    count (filter) {
      return searcher.count(filter)
    },
    async close () {
      await reads.whenIdle()
      await searcher.close()
    }
  }
}
