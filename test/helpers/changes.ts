import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { expect } from 'vitest'
import type { ChangeLog } from '../../src/store/change-log.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { bearer } from './app.js'

/** What a change's `at` is replaced by once checked, so that a page can be compared as text. */
export const AT = 'AT'

/** RFC 3339 UTC with milliseconds, exactly as `Date.prototype.toISOString` writes it. */
const AT_FIELD = /"at":"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)"/g

type Headers = Record<string, string>

export const read = (app: FastifyInstance, url: string, headers: Headers = {}) =>
  app.inject({ method: 'GET', url, headers: { ...bearer(), ...headers } })
export const put = (app: FastifyInstance, id: string, body: unknown, headers: Headers = {}) => app.inject({
  method: 'PUT', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/json', ...headers }, payload: JSON.stringify(body)
})
export const patch = (app: FastifyInstance, id: string, body: unknown, headers: Headers = {}) => app.inject({
  method: 'PATCH', url: `/plants/${id}`, headers: { ...bearer(), 'content-type': 'application/merge-patch+json', ...headers }, payload: JSON.stringify(body)
})
export const remove = (app: FastifyInstance, id: string, headers: Headers = {}) =>
  app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: { ...bearer(), ...headers } })

/** Sends each request after the answer to the one before, and asserts each answer's status. */
export async function expectStatuses (...requests: Array<[() => Promise<{ statusCode: number, body: string }>, number]>): Promise<void> {
  for (const [send, status] of requests) {
    const response = await send()
    expect(response.statusCode, response.body).toBe(status)
  }
}

/** `GET /plants/changes/head`'s `seq`, exact. */
export async function headOf (app: FastifyInstance): Promise<bigint> {
  const response = await read(app, '/plants/changes/head')
  expect(response.statusCode).toBe(200)
  const seq = /^\{"seq":(0|[1-9]\d*)\}$/.exec(response.body)?.[1]
  expect(seq, `the head's body: ${response.body}`).toBeDefined()
  return BigInt(seq as string)
}

/**
 * A page of changes (or of a history) as text, each `at` checked to be RFC 3339 UTC with milliseconds
 * and within [from, to] (the clock around the writes), then replaced by `AT`.
 */
export function withAtChecked (body: string, from: number, to: number): string {
  return body.replace(AT_FIELD, (_field, at: string) => {
    const time = Date.parse(at)
    expect(new Date(time).toISOString()).toBe(at)
    expect(time, `"at":"${at}" is not within the writes' time`).toBeGreaterThanOrEqual(from)
    expect(time, `"at":"${at}" is not within the writes' time`).toBeLessThanOrEqual(to)
    return `"at":"${AT}"`
  })
}

/** Asserts a 200 JSON page: its exact text (`at` checked, see withAtChecked) and its `Link`, or none. */
export function expectPage (response: LightMyRequestResponse, expected: { body: string, link: string | undefined, from: number, to: number }): void {
  expect({ status: response.statusCode, link: response.headers.link, body: withAtChecked(response.body, expected.from, expected.to) })
    .toEqual({ status: 200, link: expected.link, body: expected.body })
  expect(response.headers['content-type']).toBe('application/json; charset=utf-8')
  expect(response.headers['x-request-id']).toMatch(/^[\x21-\x7e]{1,128}$/)
}

/** The `Link` of a feed page: `next` as given. */
export const nextLink = (query: string) => `</plants/changes?${query}>; rel="next"`

const idOf = (plant: string) => {
  const id = /^\{"id":(-?\d+),/.exec(plant)?.[1]
  if (id === undefined) throw new Error(`not a plant's JSON: ${plant}`)
  return id
}

/** A change as the feed writes it (its `at` replaced by AT): `plant` is the plant's exact JSON text. */
export const created = (seq: bigint, plant: string) => `{"seq":${seq},"type":"plant.created","id":${idOf(plant)},"plant":${plant},"at":"${AT}"}`
export const updated = (seq: bigint, plant: string) => `{"seq":${seq},"type":"plant.updated","id":${idOf(plant)},"plant":${plant},"at":"${AT}"}`
export const deleted = (seq: bigint, id: string) => `{"seq":${seq},"type":"plant.deleted","id":${id},"at":"${AT}"}`

/** A change as a history writes it: the feed's change and who made it. */
export const by = (change: string, writer: string) => `${change.slice(0, -1)},"by":${JSON.stringify(writer)}}`

/** A page's text from the changes as the helpers above write them. */
export const page = (...changes: string[]) => `[${changes.join(',')}]`

/**
 * The store as the app sees it, but with a change log that never prunes: its changes stay in the tables
 * after CHANGES_RETENTION, so that a test sees what reads do with a change that expired but is still
 * there (retention runs every few seconds, so a real store holds such changes for a while).
 */
export function withoutPruning (store: PlantStore): PlantStore {
  const changes = new Proxy(store.changes, {
    get (target, property) {
      if (property === 'prune') return async () => 0
      const value = Reflect.get(target, property) as unknown
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
    }
  }) satisfies ChangeLog
  return new Proxy(store, {
    get (target, property) {
      if (property === 'changes') return changes
      const value = Reflect.get(target, property) as unknown
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
    }
  })
}

/** Waits until the clock has passed `ms` milliseconds after `since`. */
export async function untilPast (since: number, ms: number): Promise<void> {
  // A timer may fire a millisecond before Date.now() says its time has come: waited for again until it has.
  for (let wait = since + ms + 1 - Date.now(); wait > 0; wait = since + ms + 1 - Date.now()) {
    await new Promise((resolve) => setTimeout(resolve, wait))
  }
}
