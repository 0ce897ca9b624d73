import type pg from 'pg'
import { ReadBatch } from '../read-batch.js'
import { pageOf, plantJson, type PlantJson, type PlantStore } from '../plant-store.js'
import type { PostgresConnection } from './connection.js'

const MAX_READ_BATCH_SIZE = 500
/**
 * Reads return rows as arrays of text: the JSON document is built here from the id's decimal text (no
 * `bigint` is made for it) and the quoted name and tag. Built in SQL instead (`to_json`), the same page
 * cost the database more CPU than it saved this process (docs/benchmarks.md), and the database is the
 * part that does not scale out.
 */
const AS_TEXT = { getTypeParser: () => (text: string) => text } as unknown as pg.CustomTypesConfig
const READ_PLANTS = {
  name: 'plantstore-read-plants',
  text: 'SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_FIRST = {
  name: 'plantstore-list-first',
  text: 'SELECT id, name, tag FROM plants ORDER BY id LIMIT $1',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_AFTER = {
  name: 'plantstore-list-after',
  text: 'SELECT id, name, tag FROM plants WHERE id > $1 ORDER BY id LIMIT $2',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_TAG_FIRST = {
  name: 'plantstore-list-tag-first',
  text: 'SELECT id, name, tag FROM plants WHERE tag = $1 ORDER BY id LIMIT $2',
  rowMode: 'array',
  types: AS_TEXT
} as const
const LIST_TAG_AFTER = {
  name: 'plantstore-list-tag-after',
  text: 'SELECT id, name, tag FROM plants WHERE tag = $1 AND id > $2 ORDER BY id LIMIT $3',
  rowMode: 'array',
  types: AS_TEXT
} as const
type PlantText = [id: string, name: string, tag: string | null]

/** The plant reads: one plant by id, batched with the others of its turn, and pages of plants, all or by tag. */
export function postgresPlantReads (
  connection: PostgresConnection,
  onReadBatch: ((size: number) => void) | undefined
): Pick<PlantStore, 'get' | 'list'> {
  // GETs of one plant that arrive while others are being read share the next query.
  const reads = new ReadBatch<bigint, PlantJson>(async (ids) => {
    const { rows } = await connection.query<PlantText>({ ...READ_PLANTS, values: [ids.map(String)] })
    return new Map(rows.map(([id, name, tag]) => [BigInt(id), plantJson(id, name, tag)]))
  }, MAX_READ_BATCH_SIZE, onReadBatch)

  return {
    get (id) {
      return reads.read(id)
    },
    async list (request) {
      const { after, limit, tag } = request
      const { rows } = await connection.query<PlantText>(tag === undefined
        ? (after === undefined ? { ...LIST_FIRST, values: [limit + 1] } : { ...LIST_AFTER, values: [after.toString(), limit + 1] })
        : (after === undefined ? { ...LIST_TAG_FIRST, values: [tag, limit + 1] } : { ...LIST_TAG_AFTER, values: [tag, after.toString(), limit + 1] }))
      return pageOf(rows.map(([id, name, tag]) => plantJson(id, name, tag)), request, (index) => BigInt(rows[index]?.[0] ?? ''))
    }
  }
}
