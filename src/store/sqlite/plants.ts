import type { SqliteDatabase, Statement } from './driver.js'
import { unlessTransient } from './transient-errors.js'
import { ReadBatch } from '../read-batch.js'
import type { PlantJson } from '../plant-document.js'
import { pageOf, type PlantStore } from '../plant-store.js'
import { PLANT_DOCUMENT_SQL, TAGGED_PLANT_DOCUMENT_SQL } from './plant-document-sql.js'

const MAX_READ_BATCH_SIZE = 500

export interface SqlitePlantReads extends Pick<PlantStore, 'get' | 'list'> {
  /** Resolves once no batch of reads is under way. */
  whenIdle (): Promise<void>
}

/**
 * The plant reads, on this thread's connection: one plant by id, batched with the others of its turn,
 * and pages of plants, all or by tag.
 */
export function sqlitePlantReads (db: SqliteDatabase, onReadBatch: ((size: number) => void) | undefined): SqlitePlantReads {
  const selectPlants = documents(db.prepare<[string]>(
    `SELECT ${PLANT_DOCUMENT_SQL} FROM plants WHERE id IN (SELECT value FROM json_each(?))`))
  const listFirst = documents(db.prepare<[number]>(`SELECT ${PLANT_DOCUMENT_SQL} FROM plants ORDER BY id LIMIT ?`))
  const listAfter = documents(db.prepare<[bigint, number]>(`SELECT ${PLANT_DOCUMENT_SQL} FROM plants WHERE id > ? ORDER BY id LIMIT ?`))
  const listTagFirst = documents(db.prepare<[string, number]>(`SELECT ${TAGGED_PLANT_DOCUMENT_SQL} FROM plants WHERE tag = ? ORDER BY id LIMIT ?`))
  const listTagAfter = documents(db.prepare<[string, bigint, number]>(
    `SELECT ${TAGGED_PLANT_DOCUMENT_SQL} FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?`))

  // The GETs of one event-loop turn share one statement: one read transaction and one pass through the
  // driver for all of them costs about a third of a statement each (bench/results/2026-11-23-1052-fixed-cost.md).
  const reads = new ReadBatch<bigint, PlantJson>(async (ids) => {
    const plants = unlessTransient(() => selectPlants.all(`[${ids.join(',')}]`))
    return new Map(plants.map((json) => [idOfDocument(json), json]))
  }, MAX_READ_BATCH_SIZE, onReadBatch)

  return {
    get (id) {
      return reads.read(id)
    },
    async list (request) {
      const { after, limit, tag } = request
      const plants = unlessTransient(() => tag === undefined
        ? (after === undefined ? listFirst.all(limit + 1) : listAfter.all(after, limit + 1))
        : (after === undefined ? listTagFirst.all(tag, limit + 1) : listTagAfter.all(tag, after, limit + 1)))
      return pageOf(plants, request, (index) => idOfDocument(plants[index] ?? ''))
    },
    whenIdle: () => reads.whenIdle()
  }
}

function documents<P extends unknown[]> (statement: Statement<P>): Statement<P, PlantJson> {
  return statement.pluck(true) as unknown as Statement<P, PlantJson>
}

/** The id of a plant's document, which begins `{"id":` and the id. */
function idOfDocument (json: PlantJson): bigint {
  return BigInt(json.slice(ID_START, json.indexOf(',', ID_START)))
}

const ID_START = '{"id":'.length
