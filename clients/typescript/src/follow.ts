import { ChangesExpiredError, PlantstoreError } from './errors.js'
import { serverSentEvents, type ServerSentEvent } from './event-stream.js'
import { integerText } from './integers.js'
import { parseJson } from './json.js'
import { changeOf } from './results.js'
import { sleep } from './retry-policy.js'
import type { Transport } from './transport.js'
import type { Change, ChangeType, FollowOptions } from './types.js'

const CHANGE_TYPES: ReadonlySet<string> = new Set<ChangeType>(['plant.created', 'plant.updated', 'plant.deleted'])

/** A stream open this long was healthy: the next reconnection waits the shortest time again. */
const HEALTHY_STREAM_MS = 15_000

/**
 * The changes after `options.after` (by default after `head()`, the newest change when following
 * starts), read from the live stream (`GET /plants/changes`, `Accept: text/event-stream`) through
 * `fetch`, so that the token travels in `Authorization` as on every call (`EventSource` cannot send it).
 *
 * Whenever the stream breaks (a network failure, a service restart, a stream the service closed, a 429
 * or 5xx answer) it is opened again after the last `seq` yielded, sent as `Last-Event-ID` (and as
 * `after`, which the header overrides, so the URL in the service's log shows it too). A change at or
 * below that `seq` is never yielded again, so each change is yielded once and in order. 410 (the
 * changes after it are no longer kept) throws ChangesExpiredError; other 4xx throw their
 * PlantstoreError. Aborting `signal` ends the iteration.
 */
export async function * followChanges (transport: Transport, options: FollowOptions, head: () => Promise<bigint>): AsyncGenerator<Change, void, undefined> {
  const { signal } = options
  try {
    let last = options.after === undefined ? await head() : BigInt(integerText(options.after, 'after', 0n))
    let failures = 0
    let retryMs: number | undefined
    for (;;) {
      const openedAt = Date.now()
      const response = await transport.open({
        method: 'GET',
        path: '/plants/changes',
        query: { after: last.toString(), tag: options.tag, type: options.types?.join(',') },
        headers: { accept: 'text/event-stream', 'last-event-id': last.toString() },
        repeatable: true,
        signal
      })
      if (response instanceof PlantstoreError) {
        if (response.status === 410) throw expired(response)
        if (!reconnects(response)) throw response
        await sleep(response.retryAfter === undefined ? transport.policy.backoff(failures++) : response.retryAfter * 1000, signal)
        continue
      }
      const events = serverSentEvents(eventStreamOf(response), (ms) => { retryMs = ms })
      try {
        for (;;) {
          const next = await nextOf(events)
          if (next === undefined) break
          if (!CHANGE_TYPES.has(next.event)) continue
          const change = changeOf(parseJson(next.data))
          failures = 0
          if (change.seq <= last) continue
          last = change.seq
          yield change
        }
      } finally {
        await events.return()
      }
      if (Date.now() - openedAt >= HEALTHY_STREAM_MS) failures = 0
      await sleep(retryMs ?? transport.policy.backoff(failures++), signal)
    }
  } catch (error) {
    if (signal?.aborted === true) return
    throw error
  }
}

/** The next event, or undefined when the stream ended or broke: either way it is opened again. */
async function nextOf (events: AsyncGenerator<ServerSentEvent, void, undefined>): Promise<ServerSentEvent | undefined> {
  try {
    const next = await events.next()
    return next.done === true ? undefined : next.value
  } catch {
    return undefined
  }
}

/** Statuses that say "not now" rather than "never": the stream is opened again after a wait. */
function reconnects (error: PlantstoreError): boolean {
  return error.status === 0 || error.status === 408 || error.status === 429 || error.status >= 500
}

function eventStreamOf (response: Response): ReadableStream<Uint8Array> {
  const type = response.headers.get('content-type') ?? ''
  if (response.body === null || !/^text\/event-stream\b/i.test(type)) {
    response.body?.cancel().catch(() => {})
    throw new PlantstoreError({ status: response.status, message: `GET /plants/changes answered ${type === '' ? 'no content type' : type}, not an event stream` })
  }
  return response.body
}

function expired (error: PlantstoreError): ChangesExpiredError {
  return new ChangesExpiredError({ status: error.status, error: error.error, message: error.message, requestId: error.requestId, retryAfter: error.retryAfter })
}
