import type { SqliteDatabase } from './driver.js'

/** How many noted plants one indexing transaction takes: large batches cost a third of what small ones do. */
export const INDEX_BATCH = 10_000

/**
 * The search index's upkeep on SQLite (schema version 10): writes only note the plants whose folded name
 * changed, in plant_search_pending, with the text the index holds for each (none for a new plant). This
 * moves them into the FTS5 table in bulk: the text it held out, the name the plant has now in, the note
 * gone, all in one transaction. FTS5 writes a segment per transaction, so indexing a group commit's
 * plants as they commit costs about three times as much as indexing ten thousand at once
 * (docs/explanations/finding.md). Runs on the writer's connection, the only one that writes.
 */
export function searchIndexing (db: SqliteDatabase): { readonly indexPending: () => number } {
  const noted = db.prepare<[number], { id: bigint, indexed: string | null }>(
    'SELECT id, indexed FROM plant_search_pending ORDER BY id LIMIT ?').safeIntegers(true)
  const removeText = db.prepare<[bigint, string]>(
    "INSERT INTO plant_name_search (plant_name_search, rowid, name_folded) VALUES ('delete', ?, ?)")
  const addTexts = db.prepare<[string]>(
    'INSERT INTO plant_name_search (rowid, name_folded) SELECT id, name_folded FROM plants WHERE id IN (SELECT value FROM json_each(?))')
  const forget = db.prepare<[string]>('DELETE FROM plant_search_pending WHERE id IN (SELECT value FROM json_each(?))')
  const indexBatch = db.transaction((): number => {
    const batch = noted.all(INDEX_BATCH)
    for (const { id, indexed } of batch) if (indexed !== null) removeText.run(id, indexed)
    const ids = `[${batch.map(({ id }) => id).join(',')}]`
    addTexts.run(ids)
    forget.run(ids)
    return batch.length
  })
  return {
    /** Indexes every noted plant, a batch per transaction; how many it indexed. */
    indexPending () {
      let indexed = 0
      for (let batch = indexBatch.immediate(); batch > 0; batch = indexBatch.immediate()) indexed += batch
      return indexed
    }
  }
}
