import type { FastifyInstance } from 'fastify'
import { expect } from 'vitest'
import { bearer, TEST_TOKEN } from './app.js'
import { openEventStream, type EventStreamReader } from './event-stream.js'

/** A change as the feed shows it (`seq` and `id` within the safe integers in these tests). */
export interface FeedChange {
  readonly seq: number
  readonly type: 'plant.created' | 'plant.updated' | 'plant.deleted'
  readonly id: number
  readonly plant?: { readonly id: number, readonly name: string, readonly tag?: string }
  readonly at: string
}

/** GET /plants/changes/head. */
export async function changeHead (app: FastifyInstance): Promise<number> {
  const response = await app.inject({ method: 'GET', url: '/plants/changes/head', headers: bearer() })
  expect(response.statusCode, response.body).toBe(200)
  return (response.json() as { seq: number }).seq
}

/**
 * Every change after `after` the feed serves now, page after page (its `next` links), with each one's
 * exact JSON text as the feed sent it.
 */
export async function feedAfter (app: FastifyInstance, after: number, query = ''): Promise<Array<FeedChange & { readonly text: string }>> {
  const changes: Array<FeedChange & { readonly text: string }> = []
  let url = `/plants/changes?after=${after}&limit=1000${query}`
  for (;;) {
    const response = await app.inject({ method: 'GET', url, headers: bearer() })
    expect(response.statusCode, response.body).toBe(200)
    const page = response.json() as FeedChange[]
    if (page.length === 0) return changes
    // One change per line of the array's text would need a parser; the texts are cut at the top-level commas instead.
    const texts = splitTopLevel(response.body.slice(1, -1))
    page.forEach((change, index) => changes.push({ ...change, text: texts[index] as string }))
    url = String(/<([^>]+)>; rel="next"/.exec(String(response.headers.link))?.[1])
  }
}

/** The elements of a JSON array's inside, as text. */
function splitTopLevel (inside: string): string[] {
  const parts: string[] = []
  let depth = 0
  let inString = false
  let start = 0
  for (let index = 0; index < inside.length; index++) {
    const character = inside[index]
    if (inString) {
      if (character === '\\') index++
      else if (character === '"') inString = false
    } else if (character === '"') inString = true
    else if (character === '{' || character === '[') depth++
    else if (character === '}' || character === ']') depth--
    else if (character === ',' && depth === 0) {
      parts.push(inside.slice(start, index))
      start = index + 1
    }
  }
  if (inside.length > 0) parts.push(inside.slice(start))
  return parts
}

/** POST /plants/batch, asserting the 200. */
export async function writeBatch (app: FastifyInstance, operations: readonly unknown[], token = TEST_TOKEN): Promise<void> {
  const response = await app.inject({
    method: 'POST',
    url: '/plants/batch',
    headers: { ...bearer(token), 'content-type': 'application/json' },
    payload: JSON.stringify({ operations })
  })
  expect(response.statusCode, response.body).toBe(200)
}

/** PUT /plants/{id}, asserting a 200 or 201. */
export async function putPlant (app: FastifyInstance, id: number | string, plant: { name: string, tag?: string }): Promise<void> {
  const response = await app.inject({
    method: 'PUT',
    url: `/plants/${id}`,
    headers: { ...bearer(), 'content-type': 'application/json' },
    payload: JSON.stringify(plant)
  })
  expect([200, 201], response.body).toContain(response.statusCode)
}

/** DELETE /plants/{id}, asserting the 204. */
export async function deletePlant (app: FastifyInstance, id: number): Promise<void> {
  const response = await app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: bearer() })
  expect(response.statusCode, response.body).toBe(204)
}

/** Opens GET /plants/changes`query` as a stream on a listening app, with TEST_TOKEN unless headers say otherwise. */
export function openChangeStream (baseUrl: string, query = '', headers: Record<string, string> = {}): Promise<EventStreamReader> {
  return openEventStream(`${baseUrl}/plants/changes${query}`, { headers: { ...bearer(), ...headers } })
}

/** Opens a stream and asserts that it is one: 200, and its `retry:` preamble has arrived (the server has it open). */
export async function openLiveStream (baseUrl: string, query = '', headers: Record<string, string> = {}): Promise<EventStreamReader> {
  const stream = await openChangeStream(baseUrl, query, headers)
  expect(stream.status, stream.text()).toBe(200)
  await stream.waitFor('the retry preamble', () => stream.parser.retry !== undefined)
  return stream
}
