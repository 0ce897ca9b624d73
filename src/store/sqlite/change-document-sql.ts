/**
 * A change's JSON document as SQLite builds it for the row of `plant_changes` in scope: the same bytes as
 * `changeJson` (change-document.ts). `json_object` keeps its keys in order and escapes strings as
 * `JSON.stringify` does; the commit time is written from its integer milliseconds, so no rounding of a
 * fraction of a second can differ from `Date.prototype.toISOString`.
 */
const TYPE_SQL = "CASE type WHEN 1 THEN 'plant.created' WHEN 2 THEN 'plant.updated' ELSE 'plant.deleted' END"
const AT_SQL = "strftime('%Y-%m-%dT%H:%M:%S', committed_at / 1000, 'unixepoch') || printf('.%03dZ', committed_at % 1000)"
const PLANT_SQL = "CASE WHEN tag IS NULL THEN json_object('id', plant_id, 'name', name) ELSE json_object('id', plant_id, 'name', name, 'tag', tag) END"

export const CHANGE_DOCUMENT_SQL = `CASE WHEN name IS NULL
  THEN json_object('seq', seq, 'type', ${TYPE_SQL}, 'id', plant_id, 'at', ${AT_SQL})
  ELSE json_object('seq', seq, 'type', ${TYPE_SQL}, 'id', plant_id, 'plant', json(${PLANT_SQL}), 'at', ${AT_SQL}) END`
