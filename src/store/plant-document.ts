/**
 * A plant's JSON document, `{"id":…,"name":"…","tag":"…"}`: keys in that order, no `tag` key for a plant
 * without one, the id an exact integer literal, strings escaped as `JSON.stringify` escapes them. This is
 * the one place TypeScript writes it (reads, ETags, webhook bodies, change bodies, NDJSON lines); SQLite
 * builds the same bytes in SQL (sqlite/plant-document-sql.ts), and the store contract holds the two equal.
 */
import { jsonString } from '../json-text.js'

/**
 * A plant's JSON document, as reads answer with it. Reads return the document, not a record, so each backend
 * builds it straight from what its driver returns, and no read builds objects only for them to be serialized.
 */
export type PlantJson = string

/** A plant's JSON document; `id` may be a `bigint` or its decimal text as a database returned it. */
export function plantJson (id: bigint | string, name: string, tag: string | null | undefined): PlantJson {
  return plantJsonOfMembers(id, plantMembersJson(name, tag))
}

/** A plant's JSON document of its id and the rest of its members (`plantMembersJson`). */
export function plantJsonOfMembers (id: bigint | string, members: string): PlantJson {
  return `{"id":${id},${members}}`
}

/** The members of a plant's document after its id, `"name":…` and `,"tag":…` when it has one; a create's answer is them alone. */
export function plantMembersJson (name: string, tag: string | null | undefined): string {
  return tag === null || tag === undefined ? `"name":${jsonString(name)}` : `"name":${jsonString(name)},"tag":${jsonString(tag)}`
}
