import { idText, idValue, integerText } from './integers.js'
import { pagesOf } from './pages.js'
import { arrayOf, batchResultOf, plantChangeOf, plantOf } from './results.js'
import type { Answer, Transport } from './transport.js'
import type {
  BatchOperation, BatchResult, CallOptions, ConditionalOptions, CountQuery, HistoryOptions, ListQuery, NewPlant, Plant,
  PlantAndEtag, PlantChange, PlantId, PlantPatch, PlantReplacement, ReplaceOptions
} from './types.js'

const MERGE_PATCH = 'application/merge-patch+json'

/**
 * The `/plants` resource. Every call is sent again after a 429, a 503 or a network failure (up to the
 * client's `retries`) when repeating it is safe: reads, `create` (a replay is answered 200), `replace`,
 * `delete`; `update` only with `ifMatch`, `batch` only when each of its non-POST operations has one.
 */
export class Plants {
  constructor (private readonly transport: Transport) {}

  /** `POST /plants`. A replay of the same plant resolves as the first call did. */
  async create (plant: NewPlant, options: CallOptions = {}): Promise<PlantAndEtag> {
    const id = idValue(plant.id)
    const answer = await this.transport.send({ method: 'POST', path: '/plants', body: { ...plant, id }, repeatable: true, signal: options.signal })
    return { plant: plantOf(answer.body, id), etag: etagOf(answer) }
  }

  /** `GET /plants/{id}`; a 404 is a PlantstoreError. */
  async get (id: PlantId, options: CallOptions = {}): Promise<PlantAndEtag> {
    const answer = await this.transport.send({ method: 'GET', path: plantPath(id), repeatable: true, signal: options.signal })
    return { plant: plantOf(answer.body), etag: etagOf(answer) }
  }

  /** `PUT /plants/{id}`: creates the plant (`created`) or replaces it whole; a tag left out is removed. */
  async replace (id: PlantId, plant: PlantReplacement, options: ReplaceOptions = {}): Promise<PlantAndEtag & { readonly created: boolean }> {
    const answer = await this.transport.send({
      method: 'PUT',
      path: plantPath(id),
      body: withExactId(plant),
      headers: { 'if-match': options.ifMatch, 'if-none-match': options.ifNoneMatch },
      repeatable: true,
      signal: options.signal
    })
    return { plant: plantOf(answer.body), etag: etagOf(answer), created: answer.status === 201 }
  }

  /** `PATCH /plants/{id}` with a JSON merge patch: `{ tag: null }` removes the tag. */
  async update (id: PlantId, patch: PlantPatch, options: ConditionalOptions = {}): Promise<PlantAndEtag> {
    const answer = await this.transport.send({
      method: 'PATCH',
      path: plantPath(id),
      body: withExactId(patch),
      contentType: MERGE_PATCH,
      headers: { 'if-match': options.ifMatch },
      repeatable: options.ifMatch !== undefined,
      signal: options.signal
    })
    return { plant: plantOf(answer.body), etag: etagOf(answer) }
  }

  /** `DELETE /plants/{id}`; a 404 is a PlantstoreError. */
  async delete (id: PlantId, options: ConditionalOptions = {}): Promise<void> {
    await this.transport.send({ method: 'DELETE', path: plantPath(id), headers: { 'if-match': options.ifMatch }, repeatable: true, signal: options.signal })
  }

  /** Every plant that matches, in the sort's order, page after page (`pageSize` a request) until the last. */
  async * list (query: ListQuery = {}): AsyncGenerator<Plant, void, undefined> {
    for await (const page of this.pages(query)) yield * page
  }

  /** The same plants as `list`, a page at a time. */
  async * pages (query: ListQuery = {}): AsyncGenerator<Plant[], void, undefined> {
    const parameters = {
      limit: query.pageSize?.toString(),
      sort: query.sort,
      after: query.after === undefined ? undefined : idText(query.after),
      tag: query.tag,
      q: query.q
    }
    for await (const page of pagesOf(this.transport, '/plants', parameters, query.signal)) yield page.map((plant) => plantOf(plant))
  }

  /** How many plants match `tag` and `q`: `HEAD /plants` with `Prefer: count=exact`. */
  async count (query: CountQuery = {}): Promise<number> {
    const answer = await this.transport.send({
      method: 'HEAD',
      path: '/plants',
      query: { tag: query.tag, q: query.q, limit: '1' },
      headers: { prefer: 'count=exact' },
      repeatable: true,
      signal: query.signal
    })
    const total = answer.headers.get('x-total-count')
    if (total === null || !/^\d+$/.test(total)) throw new TypeError('the service answered a count without an X-Total-Count')
    return Number(total)
  }

  /**
   * `POST /plants/batch`: every operation in one transaction, all or none. Resolves with one result per
   * operation, as the service gives them; a failing operation rejects with its status and a message that
   * begins `operations[i]: `.
   */
  async batch (operations: readonly BatchOperation[], options: CallOptions = {}): Promise<BatchResult[]> {
    const answer = await this.transport.send({
      method: 'POST',
      path: '/plants/batch',
      body: { operations: operations.map(exactOperation) },
      repeatable: operations.every((operation) => operation.method === 'POST' || operation.ifMatch !== undefined),
      signal: options.signal
    })
    const { results } = answer.body as { results?: unknown }
    return arrayOf(results, 'batch results').map(batchResultOf)
  }

  /** `GET /plants/{id}/history`: the plant's kept changes, newest first, each with `by`. */
  async * history (id: PlantId, options: HistoryOptions = {}): AsyncGenerator<PlantChange, void, undefined> {
    const parameters = {
      after: options.after === undefined ? undefined : integerText(options.after, 'after', 0n),
      limit: options.pageSize?.toString()
    }
    for await (const page of pagesOf(this.transport, `${plantPath(id)}/history`, parameters, options.signal)) yield * page.map(plantChangeOf)
  }
}

const plantPath = (id: PlantId): string => `/plants/${idText(id)}`

function etagOf (answer: Answer): string {
  return answer.headers.get('etag') ?? ''
}

function withExactId<T extends { readonly id?: PlantId | undefined }> (body: T): T | (Omit<T, 'id'> & { id: bigint }) {
  return body.id === undefined ? body : { ...body, id: idValue(body.id) }
}

function exactOperation (operation: BatchOperation): unknown {
  const exact: Record<string, unknown> = { ...operation }
  if ('id' in operation) exact.id = idValue(operation.id)
  if (operation.method === 'POST') exact.body = { ...operation.body, id: idValue(operation.body.id) }
  else if ('body' in operation) exact.body = withExactId(operation.body)
  return exact
}
