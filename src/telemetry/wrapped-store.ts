import type { PlantStore } from '../store/plant-store.js'

export type StoreOperation = 'create' | 'get' | 'list' | 'count' | 'put' | 'patch' | 'delete' | 'writePlan'

/** Wraps one plant operation of the store: given its name and the call, returns what the routes call instead. */
export type OperationWrapper = <Args extends unknown[], Result>(
  operation: StoreOperation, call: (...args: Args) => Promise<Result>) => (...args: Args) => Promise<Result>

/** The store with each plant operation wrapped (metrics, spans); tokens, webhooks and the rest as they are. */
export function wrappedStore (store: PlantStore, wrap: OperationWrapper): PlantStore {
  return {
    backend: store.backend,
    create: wrap('create', (plant, by) => store.create(plant, by)),
    get: wrap('get', (id) => store.get(id)),
    list: wrap('list', (page) => store.list(page)),
    count: wrap('count', (filter) => store.count(filter)),
    put: wrap('put', (plant, expected, by) => store.put(plant, expected, by)),
    patch: wrap('patch', (id, patch, expected, by) => store.patch(id, patch, expected, by)),
    delete: wrap('delete', (id, expected, by) => store.delete(id, expected, by)),
    writePlan: wrap('writePlan', (plan, by) => store.writePlan(plan, by)),
    tokens: store.tokens,
    webhooks: store.webhooks,
    changes: store.changes,
    ping: () => store.ping(),
    checkWritable: () => store.checkWritable(),
    observe: (observer) => { store.observe(observer) },
    ...(store.poolUsage === undefined ? {} : { poolUsage: store.poolUsage }),
    close: () => store.close()
  }
}
