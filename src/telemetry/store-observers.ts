import type { StoreObserver } from '../store/plant-store.js'

/**
 * One observer telling both (a store has one), or the one given. Only one of them may capture a value
 * per write with `writeSubmitted` (tracing does, metrics do not): it gets its values back unchanged.
 */
export function bothStoreObservers (first: StoreObserver | undefined, second: StoreObserver | undefined): StoreObserver | undefined {
  if (first === undefined || second === undefined) return first ?? second
  if (first.writeSubmitted !== undefined && second.writeSubmitted !== undefined) {
    throw new Error('only one store observer can capture values with writeSubmitted')
  }
  return {
    writeSubmitted: first.writeSubmitted ?? second.writeSubmitted,
    writeBatchEnded: (batch) => {
      first.writeBatchEnded(batch)
      second.writeBatchEnded(batch)
    }
  }
}
