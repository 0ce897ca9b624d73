import { hash } from 'node:crypto'
import { invalidRequest } from '../errors.js'
import type { PlantJson } from '../store/plant-document.js'

/**
 * The strong entity tag of a plant: a digest of its JSON document, the representation every read
 * returns. It changes exactly when the plant's name or tag does, is the same on every instance and
 * backend, and needs nothing stored.
 */
export function entityTagOf (plant: PlantJson): string {
  return `"${hash('sha256', plant, 'base64url').slice(0, 27)}"`
}

/** `*`, or the entity tags of an `If-Match` / `If-None-Match` field, weak ones with their `W/`. */
export type EntityTagList = '*' | readonly string[]

// RFC 9110 §8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE; the field is a comma-separated list of them.
const LIST_MEMBER = /[ \t,]*((?:W\/)?"[\x21\x23-\x7e\x80-\xff]*")[ \t]*(?:,|$)/y
const EMPTY_LIST_ELEMENTS = /^[ \t,]*$/

/** The list a precondition field holds, or undefined when the field is absent; a malformed field is a 400. */
export function entityTagList (field: string, value: string | undefined): EntityTagList | undefined {
  if (value === undefined) return undefined
  if (value.trim() === '*') return '*'
  const tags: string[] = []
  let end = 0
  LIST_MEMBER.lastIndex = 0
  for (let member = LIST_MEMBER.exec(value); member !== null; member = LIST_MEMBER.exec(value)) {
    tags.push(member[1] as string)
    end = LIST_MEMBER.lastIndex
  }
  if (tags.length === 0 || !EMPTY_LIST_ELEMENTS.test(value.slice(end))) {
    throw invalidRequest(`${field} must be * or a comma-separated list of quoted entity tags, such as "xyzzy", W/"xyzzy"`)
  }
  return tags
}

/** `If-Match`: the strong comparison, so a weak tag never matches. */
export function matchesStrongly (list: EntityTagList, current: string | undefined): boolean {
  if (current === undefined) return false
  return list === '*' || list.includes(current)
}

/** `If-None-Match`: the weak comparison, which ignores a `W/`. */
export function matchesWeakly (list: EntityTagList, current: string | undefined): boolean {
  if (current === undefined) return false
  return list === '*' || list.some((tag) => (tag.startsWith('W/') ? tag.slice(2) : tag) === current)
}
