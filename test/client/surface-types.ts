/**
 * The TypeScript client's surface, as types: `npm run typecheck` compiles this file (nothing runs it), so
 * a change of a name, a parameter or a result fails CI. Each `@ts-expect-error` line is a call the
 * surface must keep refusing; each `expectType` a type it must keep giving.
 */
import {
  ChangesExpiredError, Plantstore, PlantstoreError, type BatchResult, type Change, type PlantAndEtag, type PlantChange, type Plant
} from '../../clients/typescript/src/index.js'

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
function expectType<T extends true> (): T | undefined { return undefined }
/** Marks values as used: they exist only to be type-checked. */
function checked (..._values: unknown[]): void {}

export async function surface (ps: Plantstore): Promise<void> {
  expectType<Equals<Plant, { id: bigint, name: string, tag?: string }>>()
  expectType<Equals<PlantAndEtag, { readonly plant: Plant, readonly etag: string }>>()
  expectType<Equals<Change, {
    seq: bigint
    type: 'plant.created' | 'plant.updated' | 'plant.deleted'
    id: bigint
    plant?: Plant
    at: string
  }>>()
  expectType<Equals<Omit<PlantChange, 'by'>, Omit<Change, never>>>()
  expectType<Equals<PlantChange['by'], string>>()
  expectType<Equals<BatchResult, { status: number, plant?: Plant, etag?: string }>>()

  expectType<Equals<Awaited<ReturnType<typeof ps.plants.create>>, PlantAndEtag>>()
  expectType<Equals<Awaited<ReturnType<typeof ps.plants.get>>, PlantAndEtag>>()
  expectType<Equals<Awaited<ReturnType<typeof ps.plants.replace>>, PlantAndEtag & { readonly created: boolean }>>()
  expectType<Equals<Awaited<ReturnType<typeof ps.plants.update>>, PlantAndEtag>>()
  expectType<Equals<Awaited<ReturnType<typeof ps.plants.delete>>, void>>()
  expectType<Equals<Awaited<ReturnType<typeof ps.plants.count>>, number>>()
  expectType<Equals<Awaited<ReturnType<typeof ps.plants.batch>>, BatchResult[]>>()
  expectType<Equals<Awaited<ReturnType<typeof ps.changes.head>>, bigint>>()
  expectType<Equals<ReturnType<typeof ps.plants.list>, AsyncGenerator<Plant, void, undefined>>>()
  expectType<Equals<ReturnType<typeof ps.plants.history>, AsyncGenerator<PlantChange, void, undefined>>>()
  expectType<Equals<ReturnType<typeof ps.changes.follow>, AsyncGenerator<Change, void, undefined>>>()

  // Ids go in as bigints, safe numbers or decimal text, with the plant or beside it.
  await ps.plants.create({ id: 9007199254740993n, name: 'Fern', tag: 'shade' })
  await ps.plants.create({ id: '9007199254740993', name: 'Fern' })
  await ps.plants.get(42)
  await ps.plants.replace('42', { name: 'Fern' }, { ifMatch: '"v1"', ifNoneMatch: '*' })
  await ps.plants.update(42n, { tag: null }, { ifMatch: '"v1"' })
  await ps.plants.delete(42n, { ifMatch: '"v1"', signal: AbortSignal.timeout(1000) })
  await ps.plants.batch([
    { method: 'POST', body: { id: 1, name: 'Fern' } },
    { method: 'PUT', id: 2n, body: { name: 'Moss' }, ifNoneMatch: '*' },
    { method: 'PATCH', id: '3', body: { tag: null }, ifMatch: '"v3"' },
    { method: 'DELETE', id: 4 }
  ])
  const seen: Array<Plant | Change> = []
  for await (const plant of ps.plants.list({ tag: 'shade', q: 'fern', sort: '-name', pageSize: 500 })) seen.push(plant)
  for await (const change of ps.changes.follow({ after: 0n, tag: 'shade', types: ['plant.created'] })) seen.push(change)

  // @ts-expect-error an id is a bigint, a number or a string, nothing else
  await ps.plants.get(true)
  // @ts-expect-error a plant needs an id
  await ps.plants.create({ name: 'Fern' })
  // @ts-expect-error a result's id is a bigint, never a number
  const rounded: number = (await ps.plants.get(1n)).plant.id
  // @ts-expect-error a merge patch cannot remove the name
  await ps.plants.update(1n, { name: null })
  // @ts-expect-error sort is id, -id, name or -name
  ps.plants.list({ sort: 'tag' })
  // @ts-expect-error a batch DELETE names its id
  await ps.plants.batch([{ method: 'DELETE' }])
  // @ts-expect-error a batch has no GET
  await ps.plants.batch([{ method: 'GET', id: 1 }])
  // @ts-expect-error a count is a number
  const countedExactly: bigint = await ps.plants.count()
  // @ts-expect-error the head is a bigint
  const headNumber: number = await ps.changes.head()
  // @ts-expect-error changes are of three types only
  ps.changes.follow({ types: ['plant.moved'] })
  // @ts-expect-error the client needs a token
  const anonymous = new Plantstore({ baseUrl: 'http://127.0.0.1:3000' })
  checked(rounded, countedExactly, headNumber, anonymous)

  const client = new Plantstore({ baseUrl: new URL('http://127.0.0.1:3000'), token: 'pst_x', fetch: globalThis.fetch, retries: 0, retryDelay: { initialMs: 100, maxMs: 1000 }, userAgent: 'me' })
  checked(client, seen)
  const error: unknown = undefined
  if (error instanceof PlantstoreError) {
    expectType<Equals<[typeof error.status, typeof error.error, typeof error.message], [number, number, string]>>()
    expectType<Equals<[typeof error.requestId, typeof error.retryAfter], [string | undefined, number | undefined]>>()
  }
  expectType<Equals<ChangesExpiredError extends PlantstoreError ? true : false, true>>()
}
