import type { PlantStore } from '../store/plant-store.js'

export type StoreOperation = 'create' | 'get' | 'list' | 'count' | 'put' | 'patch' | 'delete' | 'writePlan'

/** Wraps one plant operation of the store: given its name and the call, returns what the routes call instead. */
export type OperationWrapper = <Args extends unknown[], Result>(
  operation: StoreOperation, call: (...args: Args) => Promise<Result>) => (...args: Args) => Promise<Result>

/** The store with each plant operation wrapped (metrics, spans); tokens, webhooks and the rest as they are. */
export function wrappedStore (store: PlantStore, wrap: OperationWrapper): PlantStore {
  return {
    backend: store.backend,
    create: wrap('create', (plant) => store.create(plant)),
    get: wrap('get', (id) => store.get(id)),
    list: wrap('list', (page) => store.list(page)),
    count: wrap('count', (filter) => store.count(filter)),
    put: wrap('put', (plant, expected) => store.put(plant, expected)),
    patch: wrap('patch', (id, patch, expected) => store.patch(id, patch, expected)),
    delete: wrap('delete', (id, expected) => store.delete(id, expected)),
    writePlan: wrap('writePlan', (plan) => store.writePlan(plan)),
    tokens: store.tokens,
    webhooks: store.webhooks,
    ping: () => store.ping(),
    checkWritable: () => store.checkWritable(),
    observe: (observer) => { store.observe(observer) },
    ...(store.poolUsage === undefined ? {} : { poolUsage: store.poolUsage }),
    close: () => store.close()
  }
}
