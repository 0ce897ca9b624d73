import { createHash } from 'node:crypto'
import { invalidRequest } from '../errors.js'
import { isIntegerText, plantTextViolation } from '../schemas/kinds.js'
import { NAME_RULE } from '../schemas/plants.js'
import type { NamePosition, PlantFilter } from '../store/plant-store.js'

/** What a cursor is valid for: the listing it continues. */
export interface CursorScope extends PlantFilter {
  readonly sort: 'name' | '-name'
}

/** Base64url without padding, as a query parameter needs no escaping. */
const DIGEST_LENGTH = 12

/**
 * The `cursor` of a name-ordered listing: where its next page starts (the last plant's name and id),
 * with a digest of that position and of the listing's `sort`, `q` and `tag`. The digest is no secret:
 * it tells a damaged cursor, or one taken from another listing, from a good one, so that either is a 400
 * rather than a page of another listing. A cursor a client makes up can only name a place to start.
 */
export function encodePageCursor (scope: CursorScope, position: NamePosition): string {
  const payload = Buffer.from(JSON.stringify([position.name, position.id.toString()])).toString('base64url')
  return `${payload}.${digestOf(scope, payload)}`
}

/** The position a cursor names, or a 400 naming `cursor` when it is damaged or was made for another listing. */
export function decodePageCursor (scope: CursorScope, cursor: string): NamePosition {
  const separator = cursor.lastIndexOf('.')
  const payload = cursor.slice(0, separator)
  if (separator === -1 || cursor.slice(separator + 1) !== digestOf(scope, payload)) {
    throw invalidRequest('query parameter cursor is damaged, or was made for another sort, q or tag: take it from the Link ' +
      'header of the listing it continues')
  }
  let position: unknown
  try {
    position = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
  } catch {
    position = undefined
  }
  const [name, id] = Array.isArray(position) && position.length === 2 ? position as unknown[] : []
  if (plantTextViolation(name, NAME_RULE) !== undefined || !isIntegerText(id, {})) {
    throw invalidRequest('query parameter cursor does not name a place in a listing')
  }
  return { name: name as string, id: BigInt(id as string) }
}

function digestOf ({ sort, q, tag }: CursorScope, payload: string): string {
  const hash = createHash('sha256')
  // Each part is told apart from an absent one and from its neighbours.
  for (const part of [sort, q, tag, payload]) hash.update(part === undefined ? '\u0001' : `\u0002${part}\u0000`)
  return hash.digest().subarray(0, DIGEST_LENGTH).toString('base64url')
}
