import { beforeAll } from 'vitest'
import { Plantstore, type PlantstoreOptions } from '../../clients/typescript/src/index.js'
import { sharedTestApp, TEST_TOKEN, type Backend, type TestAppOptions } from './app.js'

export interface ClientService {
  /** Where the service listens: http://127.0.0.1:<port>. */
  readonly baseUrl: string
  /** A client of it with TEST_TOKEN (and the given options). */
  readonly client: (options?: Partial<PlantstoreOptions>) => Plantstore
}

/**
 * The production app on one fresh store of `backend` for every test of the enclosing `describe`,
 * listening on a free port of 127.0.0.1 (as sharedTestApp builds it, and closes it after the last
 * test), with the TypeScript client pointed at it. Call it in the body of a `describe`.
 */
export function sharedClientService (backend: Backend, options: Omit<TestAppOptions, 'store'> = {}): () => ClientService {
  const app = sharedTestApp(backend, options)
  let baseUrl: string | undefined
  beforeAll(async () => {
    baseUrl = await app().listen({ port: 0, host: '127.0.0.1' })
  })
  return () => {
    if (baseUrl === undefined) throw new Error('the shared service listens before the first test of its describe: take it inside a test')
    const url = baseUrl
    return { baseUrl: url, client: (clientOptions = {}) => new Plantstore({ baseUrl: url, token: TEST_TOKEN, ...clientOptions }) }
  }
}
