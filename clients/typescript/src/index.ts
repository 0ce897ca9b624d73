export { Plantstore, type PlantstoreOptions } from './plantstore.js'
export { PlantstoreError, ChangesExpiredError, type PlantstoreErrorDetails } from './errors.js'
export type { Plants } from './plants.js'
export type { Changes } from './changes.js'
export type { Fetch } from './transport.js'
export type { RetryDelay } from './retry-policy.js'
export type {
  BatchOperation, BatchResult, CallOptions, Change, ChangeType, ConditionalOptions, CountQuery, ErrorBody, FollowOptions,
  HistoryOptions, Input, ListQuery, NewPlant, Plant, PlantAndEtag, PlantChange, PlantId, PlantPatch, PlantReplacement,
  PlantSort, ReplaceOptions
} from './types.js'
