import type { FastifyRequest } from 'fastify'
import { entityTagList, matchesStrongly, matchesWeakly, type EntityTagList } from './entity-tags.js'

/** A write's or a read's `If-Match` and `If-None-Match` (RFC 9110 §13.1). */
export interface Preconditions {
  readonly ifMatch: EntityTagList | undefined
  readonly ifNoneMatch: EntityTagList | undefined
  /** Whether both hold for a plant with this ETag (undefined: no plant). */
  holdFor (entityTag: string | undefined): boolean
}

/** The request's If-Match and If-None-Match, or undefined when it has neither; a malformed one is a 400. */
export function preconditionsOf (request: FastifyRequest): Preconditions | undefined {
  return preconditionsFrom(request.headers['if-match'], request.headers['if-none-match'])
}

/** The preconditions of these field values, named as `names` says in the 400 of a malformed one. */
export function preconditionsFrom (
  ifMatchValue: string | undefined,
  ifNoneMatchValue: string | undefined,
  names: { readonly ifMatch: string, readonly ifNoneMatch: string } = { ifMatch: 'header If-Match', ifNoneMatch: 'header If-None-Match' }
): Preconditions | undefined {
  const ifMatch = entityTagList(names.ifMatch, ifMatchValue)
  const ifNoneMatch = entityTagList(names.ifNoneMatch, ifNoneMatchValue)
  if (ifMatch === undefined && ifNoneMatch === undefined) return undefined
  return {
    ifMatch,
    ifNoneMatch,
    holdFor: (entityTag) =>
      (ifMatch === undefined || matchesStrongly(ifMatch, entityTag)) &&
      (ifNoneMatch === undefined || !matchesWeakly(ifNoneMatch, entityTag))
  }
}
