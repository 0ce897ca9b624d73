import type { SqliteDatabase, Statement } from './driver.js'
import { unlessTransient } from './transient-errors.js'
import { ReadBatch } from '../read-batch.js'
import { pageOf, plantJson, plantJsonOfTag, type PlantJson, type PlantStore } from '../plant-store.js'

const MAX_READ_BATCH_SIZE = 500

/**
 * A plant read as one text, `id NUL name [NUL tag]`: the driver turns each value it returns into a
 * JavaScript value at a fixed cost, so one text per row reads a page in about two thirds of the time
 * three values take (docs/benchmarks.md). No name or tag holds U+0000 (the field rules refuse it).
 */
const PACKED_PLANT = "id || char(0) || name || CASE WHEN tag IS NULL THEN '' ELSE char(0) || tag END"
const PACKED_ID_AND_NAME = 'id || char(0) || name'

export interface SqlitePlantReads extends Pick<PlantStore, 'get' | 'list'> {
  /** Resolves once no batch of reads is under way. */
  whenIdle (): Promise<void>
}

/**
 * The plant reads, on this thread's connection: one plant by id, batched with the others of its turn,
 * and pages of plants, all or by tag.
 */
export function sqlitePlantReads (db: SqliteDatabase, onReadBatch: ((size: number) => void) | undefined): SqlitePlantReads {
  const selectPlants = packedRows(db.prepare<[string]>(
    `SELECT ${PACKED_PLANT} FROM plants WHERE id IN (SELECT value FROM json_each(?))`))
  const listFirst = packedRows(db.prepare<[number]>(`SELECT ${PACKED_PLANT} FROM plants ORDER BY id LIMIT ?`))
  const listAfter = packedRows(db.prepare<[bigint, number]>(`SELECT ${PACKED_PLANT} FROM plants WHERE id > ? ORDER BY id LIMIT ?`))
  // A tag's page leaves the tag out of its rows: it is the one asked for.
  const listTagFirst = packedRows(db.prepare<[string, number]>(`SELECT ${PACKED_ID_AND_NAME} FROM plants WHERE tag = ? ORDER BY id LIMIT ?`))
  const listTagAfter = packedRows(db.prepare<[string, bigint, number]>(
    `SELECT ${PACKED_ID_AND_NAME} FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?`))

  // The GETs of one event-loop turn share one statement: one read transaction and one pass through the
  // driver for all of them costs about a third of a statement each (docs/benchmarks.md).
  const reads = new ReadBatch<bigint, PlantJson>(async (ids) => {
    const packed = unlessTransient(() => selectPlants.all(`[${ids.join(',')}]`))
    return new Map(packed.map((row) => {
      const plant = unpack(row)
      return [BigInt(plant.id), plant.json]
    }))
  }, MAX_READ_BATCH_SIZE, onReadBatch)

  return {
    get (id) {
      return reads.read(id)
    },
    async list (request) {
      const { after, limit, tag } = request
      if (tag !== undefined) {
        const packed = unlessTransient(() => after === undefined ? listTagFirst.all(tag, limit + 1) : listTagAfter.all(tag, after, limit + 1))
        const plantOfTag = plantJsonOfTag(tag)
        const plants = packed.map((row) => {
          const idEnd = row.indexOf('\0')
          const id = row.slice(0, idEnd)
          return { id, json: plantOfTag(id, row.slice(idEnd + 1)) }
        })
        return pageOf(plants.map((plant) => plant.json), request, (index) => BigInt(plants[index]?.id ?? ''))
      }
      const packed = unlessTransient(() => after === undefined ? listFirst.all(limit + 1) : listAfter.all(after, limit + 1))
      const plants = packed.map(unpack)
      return pageOf(plants.map((plant) => plant.json), request, (index) => BigInt(plants[index]?.id ?? ''))
    },
    whenIdle: () => reads.whenIdle()
  }
}

function packedRows<P extends unknown[]> (statement: Statement<P>): Statement<P, string> {
  return statement.pluck(true) as unknown as Statement<P, string>
}

/** The id (as decimal text) and the JSON document of a packed plant. */
function unpack (packed: string): { readonly id: string, readonly json: PlantJson } {
  const idEnd = packed.indexOf('\0')
  const nameEnd = packed.indexOf('\0', idEnd + 1)
  const id = packed.slice(0, idEnd)
  const json = nameEnd === -1
    ? plantJson(id, packed.slice(idEnd + 1), null)
    : plantJson(id, packed.slice(idEnd + 1, nameEnd), packed.slice(nameEnd + 1))
  return { id, json }
}
