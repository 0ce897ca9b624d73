import type { components, operations } from './generated/openapi.js'
import type { IntegerInput } from './integers.js'

type Schemas = components['schemas']

/** An id as an argument: a bigint, a safe-integer number or canonical decimal text. Results always carry bigints. */
export type PlantId = IntegerInput

/** A wire type as an argument: every int64 (a bigint in results) may also be a safe number or decimal text. */
export type Input<T> = T extends bigint
  ? PlantId
  : T extends readonly unknown[]
    ? { readonly [K in keyof T]: Input<T[K]> }
    : T extends object ? { readonly [K in keyof T]: Input<T[K]> } : T

/** A plant as the service holds it: `{ id, name, tag? }`, its id a bigint. */
export type Plant = Schemas['StoredPlant']
export type NewPlant = Input<Schemas['NewPlant']>
export type PlantReplacement = Input<Schemas['PlantReplacement']>
/** A JSON merge patch: a member present changes the plant, `tag: null` removes the tag. */
export type PlantPatch = Input<Schemas['PlantPatch']>
export type BatchOperation = Input<Schemas['BatchRequest']['operations'][number]>
/** One operation's outcome, as the service gives it: `status`, and `plant` and `etag` except for a DELETE. */
export type BatchResult = Schemas['BatchResult']
export type ErrorBody = Schemas['Error']

type ListParameters = NonNullable<operations['listPlants']['parameters']['query']>
export type PlantSort = NonNullable<ListParameters['sort']>

export interface CallOptions {
  /** Aborts the call, and stops its retries; the call rejects with the signal's reason. */
  readonly signal?: AbortSignal | undefined
}

export interface PlantAndEtag {
  readonly plant: Plant
  /** The plant's version, for `ifMatch`. */
  readonly etag: string
}

export interface ReplaceOptions extends CallOptions {
  /** Replace only while the plant has this ETag (`*`: while it exists); otherwise 412. */
  readonly ifMatch?: string | undefined
  /** `*`: create only; 412 when the plant exists. */
  readonly ifNoneMatch?: string | undefined
}

export interface ConditionalOptions extends CallOptions {
  /** Write only while the plant has this ETag (`*`: while it exists); otherwise 412. It also makes a PATCH safe to retry. */
  readonly ifMatch?: string | undefined
}

export interface CountQuery extends CallOptions {
  readonly tag?: string | undefined
  readonly q?: string | undefined
}

export interface ListQuery extends CountQuery {
  readonly sort?: PlantSort | undefined
  /** Plants a page holds, 1–1000 (default 100): how many each request fetches. */
  readonly pageSize?: number | undefined
  /** With an id sort: start after this id, in the sort's direction. */
  readonly after?: PlantId | undefined
}

/** One committed change of one plant: `seq` grows in commit order; `plant` is absent for `plant.deleted`. */
export type Change = Schemas['Change']
export type ChangeType = Change['type']
/** A change in a plant's history: with `by`, the name of the token that made it. */
export type PlantChange = Schemas['PlantHistoryChange']

export interface HistoryOptions extends CallOptions {
  /** Continue with the changes older than this `seq`. */
  readonly after?: IntegerInput | undefined
  /** Changes a page holds, 1–1000. */
  readonly pageSize?: number | undefined
}

export interface FollowOptions extends CallOptions {
  /** Yield the changes after this `seq`; by default, those committed from now on. */
  readonly after?: IntegerInput | undefined
  /** Only the changes of plants that had this tag before or after the change. */
  readonly tag?: string | undefined
  readonly types?: readonly ChangeType[] | undefined
}
