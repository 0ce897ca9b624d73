import { ReadBatch } from '../read-batch.js'
import type { PlantJson } from '../plant-document.js'
import type { PlantStore } from '../plant-store.js'
import { PlantDocumentsQuery, PlantPageQuery } from './plant-documents-query.js'
import { countStatement, pageStatement } from './plant-pages.js'
import { SharedPages } from './shared-pages.js'
import type { PostgresConnection } from './connection.js'

const MAX_READ_BATCH_SIZE = 500
/*
 * The statements select each row's `id, name, tag` and nothing more: the JSON documents are built from the
 * fields' text in this process, by plant-documents-query.ts. Built in SQL instead (`to_json`), the same
 * page cost the database more CPU than it saved this process (bench/results/2026-11-23-1052-fixed-cost.md),
 * and the database is the part that does not scale out.
 */
const READ_PLANTS = { name: 'plantstore-read-plants', text: 'SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])' }
/**
 * The plant reads: one plant by id, batched with the others of its turn; pages of plants in any order,
 * filtered by tag and search (plant-pages.ts); and counts.
 */
export function postgresPlantReads (
  connection: PostgresConnection,
  onReadBatch: ((size: number) => void) | undefined
): Pick<PlantStore, 'get' | 'list' | 'count'> {
  // GETs of one plant that arrive while others are being read share the next query.
  const reads = new ReadBatch<bigint, PlantJson>(async (ids) => {
    const query = new PlantDocumentsQuery(READ_PLANTS, [ids.map(String)])
    await connection.submit(query)
    return query.documents
  }, MAX_READ_BATCH_SIZE, onReadBatch)
  const pages = new SharedPages(connection.connectTimeoutMs)

  return {
    get (id) {
      return reads.read(id)
    },
    list (request) {
      return pages.read(request, async (onSent) => {
        const { statement, values } = pageStatement(request)
        const query = new PlantPageQuery(statement, values, request, onSent)
        await connection.submit(query)
        return query.page()
      })
    },
    async count (filter) {
      const { statement, values } = countStatement(filter)
      const { rows } = await connection.query<{ count: bigint }>({ ...statement, values })
      return Number(rows[0]?.count ?? 0n)
    }
  }
}
