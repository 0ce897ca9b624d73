/**
 * A plant's JSON document as SQLite builds it, for the columns `id`, `name` and `tag` of the row in scope:
 * the same bytes as `plantJson` (plant-document.ts), since `json_object` keeps its keys in order and
 * escapes strings as `JSON.stringify` does. Built by SQLite, a page is read in about three quarters of
 * the time a row of values and a document built in TypeScript take (bench/results/2026-11-23-1052-fixed-cost.md).
 */
export const PLANT_DOCUMENT_SQL = "CASE WHEN tag IS NULL THEN json_object('id', id, 'name', name) ELSE json_object('id', id, 'name', name, 'tag', tag) END"

/** ...of a plant known to have a tag, as the plants of a tag's page are. */
export const TAGGED_PLANT_DOCUMENT_SQL = "json_object('id', id, 'name', name, 'tag', tag)"
