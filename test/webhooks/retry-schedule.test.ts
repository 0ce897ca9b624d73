import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { backends, buildTestApp, postPlant } from '../helpers/app.js'
import { collectingStream } from '../helpers/log-lines.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import {
  deliveryAttempts, subscribe, subscriptionStatus, waitFor, WEBHOOK_TEST_CONFIG, WEBHOOK_TEST_TOKENS, type DeliveryAttempt
} from '../helpers/webhooks.js'

// API.md's retry rules, on a short clock: the first retry after about `firstRetryMs`, doubling, each ±20 %,
// capped at `maxRetryMs`, given up (failed) once the next attempt would fall past `retryForMs` after the
// event; a 2xx within 10 s is success, no answer by then a failed attempt (a status that comes later:
// receiver-post.test.ts). Every attempt is signed with its own time.

const FIRST_RETRY_MS = 200
const MAX_RETRY_MS = 400
const RETRY_FOR_MS = 2000
/** How long to wait after an event failed, to see that no attempt follows. */
const SLACK_MS = 300

const timeOf = (attempt: DeliveryAttempt) => Date.parse(attempt.at)
const gapsBetween = (attempts: readonly DeliveryAttempt[]) => attempts.slice(1).map((attempt, i) => timeOf(attempt) - timeOf(attempts[i]!))
/** The webhook-timestamp of an attempt: the Unix second it was made in. */
const secondOf = (attempt: DeliveryAttempt) => Math.floor(timeOf(attempt) / 1000)

describe.each(backends)('the retry schedule of a webhook event ($name)', (backend) => {
  it('doubles from the first retry up to the cap, then marks the event failed once the next attempt would fall past the retry period', async () => {
    const log = collectingStream()
    const app = await buildTestApp({
      store: await backend.open(),
      tokens: WEBHOOK_TEST_TOKENS,
      logStream: log.stream,
      config: { logLevel: 'debug', webhooks: { ...WEBHOOK_TEST_CONFIG, pollMs: 5, firstRetryMs: FIRST_RETRY_MS, maxRetryMs: MAX_RETRY_MS, retryForMs: RETRY_FOR_MS } }
    })
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(app, receiver)
    receiver.answerWith(() => ({ status: 503 }))

    const committedAfter = Date.now()
    expect((await postPlant(app, '{"id":7,"name":"Calathea"}')).statusCode).toBe(200)
    const committedBefore = Date.now()
    await waitFor(() => subscriptionStatus(app, subscriptionId), ({ failed }) => failed === 1, RETRY_FOR_MS + 3000)
    await sleep(MAX_RETRY_MS + SLACK_MS)

    const deliveries = [...receiver.deliveries]
    const attempts = (await deliveryAttempts(app, subscriptionId)).reverse()
    expect(attempts.map(({ attempt, statusCode, error }) => ({ attempt, statusCode, error })))
      .toEqual(deliveries.map((_, i) => ({ attempt: i + 1, statusCode: 503, error: undefined })))
    expect(attempts.length).toBeGreaterThanOrEqual(5)
    expect(new Set(deliveries.map(({ id }) => id))).toEqual(new Set([attempts[0]!.eventId]))
    expect(deliveries.map(({ verified, timestamp }) => ({ verified, timestamp }))).toEqual(attempts.map((attempt) => ({ verified: true, timestamp: secondOf(attempt) })))
    expect(secondOf(attempts.at(-1)!)).toBeGreaterThan(secondOf(attempts[0]!))
    // Scheduled 200 ms ±20 % after the first attempt, then 400 ms ±20 % (the cap cuts off the top), as the
    // dispatcher logged each retry's delay; a loaded machine only makes an attempt later than scheduled.
    const delays = log.lines().filter((line) => line.msg === 'webhooks: delivery failed; retrying').map((line) => line.retryInMs as number)
    expect(delays).toHaveLength(attempts.length - 1)
    expect(delays[0]).toBeGreaterThanOrEqual(0.8 * FIRST_RETRY_MS)
    expect(delays[0]).toBeLessThanOrEqual(1.2 * FIRST_RETRY_MS)
    for (const delay of delays.slice(1)) {
      expect(delay).toBeGreaterThanOrEqual(0.8 * MAX_RETRY_MS)
      expect(delay).toBeLessThanOrEqual(MAX_RETRY_MS)
    }
    gapsBetween(attempts).forEach((gap, index) => expect(gap).toBeGreaterThanOrEqual(delays[index] as number))
    // Given up neither early nor late: the last attempt was scheduled within the period, and its successor
    // (at most the cap later) would fall past it.
    const last = timeOf(attempts.at(-1)!)
    expect(timeOf(attempts.at(-2)!) + (delays.at(-1) as number)).toBeLessThanOrEqual(committedBefore + RETRY_FOR_MS)
    expect(last + MAX_RETRY_MS).toBeGreaterThan(committedAfter + RETRY_FOR_MS)
    expect(log.lines().filter((line) => line.msg === 'webhooks: an event is given up on after its last retry')).toHaveLength(1)
    expect(await subscriptionStatus(app, subscriptionId)).toMatchObject({ pending: 0, delivered: 0, failed: 1, lastError: { message: 'HTTP 503', at: attempts.at(-1)!.at } })
  })
})

describe('the jitter of webhook retries', () => {
  it('spreads the retries of events that failed together, each scheduled 200 ms ±20 % after its first attempt, none made sooner', async () => {
    const log = collectingStream()
    const app = await buildTestApp({
      store: await backends[1]!.open(),
      tokens: WEBHOOK_TEST_TOKENS,
      logStream: log.stream,
      config: { logLevel: 'debug', webhooks: { ...WEBHOOK_TEST_CONFIG, pollMs: 5 } }
    })
    const receivers = await Promise.all(Array.from({ length: 4 }, () => WebhookReceiver.start()))
    // Four events per receiver: under the five failures in a row that open a receiver's circuit.
    const subscriptionIds: string[] = []
    for (const receiver of receivers) {
      subscriptionIds.push(await subscribe(app, receiver))
      receiver.answerWith((delivery) => ({ status: receiver.deliveries.filter(({ id }) => id === delivery.id).length === 1 ? 500 : 204 }))
    }

    for (let id = 1; id <= 4; id++) expect((await postPlant(app, `{"id":${id},"name":"Pilea"}`)).statusCode).toBe(200)
    await Promise.all(receivers.map((receiver) => receiver.waitForDeliveries(8)))
    for (const subscriptionId of subscriptionIds) await waitFor(() => subscriptionStatus(app, subscriptionId), ({ delivered }) => delivered === 4, 3000)

    // The delay each retry was scheduled with, as the dispatcher logged it: what a loaded machine cannot move.
    const scheduled = new Map(log.lines().filter((line) => line.msg === 'webhooks: delivery failed; retrying')
      .map((line) => [`${String(line.subscription)} ${String(line.event)}`, line.retryInMs as number]))
    expect(scheduled.size).toBe(16)
    for (const delay of scheduled.values()) {
      expect(delay).toBeGreaterThanOrEqual(0.8 * FIRST_RETRY_MS)
      expect(delay).toBeLessThanOrEqual(1.2 * FIRST_RETRY_MS)
    }
    // Without jitter every delay would be 200 ms: sixteen equal ones among 81 possible would happen once in 10^30 runs.
    expect(new Set(scheduled.values()).size).toBeGreaterThan(1)

    for (const subscriptionId of subscriptionIds) {
      const attempts = (await deliveryAttempts(app, subscriptionId)).reverse()
      expect(attempts.map(({ attempt, statusCode }) => ({ attempt, statusCode })).sort((a, b) => a.attempt - b.attempt)).toEqual([
        ...Array.from({ length: 4 }, () => ({ attempt: 1, statusCode: 500 })), ...Array.from({ length: 4 }, () => ({ attempt: 2, statusCode: 204 }))
      ])
      for (const first of attempts.filter(({ attempt }) => attempt === 1)) {
        const retry = attempts.find(({ eventId, attempt }) => eventId === first.eventId && attempt === 2)!
        expect(timeOf(retry) - timeOf(first)).toBeGreaterThanOrEqual(scheduled.get(`${subscriptionId} ${first.eventId}`) as number)
      }
    }
  })
  it('counts a 2xx after 9 s as delivered, and an answer still missing at 10 s as a failed attempt, retried at once with a new timestamp', async () => {
    const app = await buildTestApp({ store: await backends[1]!.open(), tokens: WEBHOOK_TEST_TOKENS, config: { webhooks: WEBHOOK_TEST_CONFIG } })
    const receiver = await WebhookReceiver.start()
    const subscriptionId = await subscribe(app, receiver)
    receiver.answerWith((delivery) => {
      if (delivery.body === '{"id":1,"name":"slow"}') return { status: 204, delayMs: 9000 }
      const attempt = receiver.deliveries.filter(({ id }) => id === delivery.id).length
      return attempt === 1 ? { status: 204, delayMs: 12_000 } : { status: 204 }
    })

    expect((await postPlant(app, '{"id":1,"name":"slow"}')).statusCode).toBe(200)
    expect((await postPlant(app, '{"id":2,"name":"too slow"}')).statusCode).toBe(200)
    await waitFor(() => subscriptionStatus(app, subscriptionId), ({ delivered }) => delivered === 2, 15_000)

    const slow = receiver.deliveries.filter(({ body }) => body === '{"id":1,"name":"slow"}')
    const tooSlow = receiver.deliveries.filter(({ body }) => body === '{"id":2,"name":"too slow"}')
    expect(slow).toHaveLength(1)
    expect(tooSlow).toHaveLength(2)
    const eventId = tooSlow[0]!.id
    expect(tooSlow[1]!.id).toBe(eventId)
    const attempts = (await deliveryAttempts(app, subscriptionId)).reverse()
    expect(attempts.map(({ eventId, attempt, statusCode, error }) => ({ eventId, attempt, statusCode, error }))).toEqual(expect.arrayContaining([
      { eventId: slow[0]!.id, attempt: 1, statusCode: 204, error: undefined },
      { eventId, attempt: 1, statusCode: undefined, error: 'no answer within 10 s' },
      { eventId, attempt: 2, statusCode: 204, error: undefined }
    ]))
    expect(attempts).toHaveLength(3)
    const [first, retry] = attempts.filter((attempt) => attempt.eventId === eventId) as [DeliveryAttempt, DeliveryAttempt]
    // The retry is due 200 ms ±20 % after the first attempt, long before its failure is known: undici's
    // timers give up 10 to 10.5 s after the request was written.
    expect(timeOf(retry) - timeOf(first)).toBeGreaterThanOrEqual(10_000)
    expect(timeOf(retry) - timeOf(first)).toBeLessThanOrEqual(10_500 + 1000)
    expect(tooSlow.map(({ timestamp, verified }) => ({ timestamp, verified }))).toEqual([
      { timestamp: secondOf(first), verified: true }, { timestamp: secondOf(retry), verified: true }
    ])
  })
})
