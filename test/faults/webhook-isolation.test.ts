import { createServer, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { DEFAULT_WEBHOOK_CONFIG } from '../../src/config.js'
import { backends, bearer, buildTestApp, postPlant } from '../helpers/app.js'
import { listenOnLoopback } from '../helpers/test-servers.js'
import { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { ADMIN_TOKEN, subscribe, WEBHOOK_TEST_TOKENS } from '../helpers/webhooks.js'

const WRITES_PER_SECOND = 20
const WRITING_MS = 20_000
const WRITES = (WRITES_PER_SECOND * WRITING_MS) / 1000
/** How long the healthy receiver is given, after the last write, for the events still on their way. */
const SETTLE_MS = 10_000

/** A receiver that accepts connections and reads the requests but never answers: each attempt waits out its 10 s. */
async function startSilentReceiver (): Promise<string> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('data', () => {})
    socket.on('close', () => sockets.delete(socket))
  })
  const port = await listenOnLoopback(server, async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return `http://127.0.0.1:${port}/hooks`
}

async function subscribeUrl (app: FastifyInstance, url: string): Promise<void> {
  const response = await app.inject({ method: 'POST', url: '/admin/webhooks', headers: bearer(ADMIN_TOKEN), payload: { url } })
  expect(response.statusCode, response.body).toBe(201)
}

function percentile (sorted: readonly number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN
}

/**
 * Writes `WRITES` new plants at `WRITES_PER_SECOND`, each paced from the start (not from the answer
 * before), and returns when each write was answered, by plant id.
 */
async function writeAtSteadyRate (app: FastifyInstance): Promise<Map<number, number>> {
  const answeredAt = new Map<number, number>()
  const started = Date.now()
  const writes: Array<Promise<void>> = []
  for (let index = 0; index < WRITES; index++) {
    const due = started + (index * 1000) / WRITES_PER_SECOND
    if (due > Date.now()) await sleep(due - Date.now())
    const id = 1 + index
    writes.push(postPlant(app, `{"id":${id},"name":"isolated ${id}"}`).then((response) => {
      expect(response.statusCode, response.body).toBe(200)
      answeredAt.set(id, Date.now())
    }))
  }
  await Promise.all(writes)
  return answeredAt
}

/** Each healthy event's delay from its write's answer to its arrival, and the writes whose event never came. */
async function healthyDelays (receiver: WebhookReceiver, answeredAt: ReadonlyMap<number, number>) {
  const deadline = Date.now() + SETTLE_MS
  while (receiver.deliveries.length < answeredAt.size && Date.now() < deadline) await sleep(50)
  const arrivedAt = new Map<number, number>()
  for (const delivery of receiver.deliveries) {
    expect(delivery.verified).toBe(true)
    const id = Number(/^\{"id":(\d+),/.exec(delivery.body)?.[1])
    if (!arrivedAt.has(id)) arrivedAt.set(id, delivery.receivedAt)
  }
  const delays = [...answeredAt].flatMap(([id, answered]) => {
    const arrived = arrivedAt.get(id)
    return arrived === undefined ? [] : [arrived - answered]
  }).sort((a, b) => a - b)
  return {
    lost: answeredAt.size - delays.length,
    p50: percentile(delays, 0.5),
    p99: percentile(delays, 0.99),
    max: delays.at(-1) ?? Number.NaN
  }
}

const variants = [
  { name: 'silent (never answers)', start: startSilentReceiver },
  {
    name: 'failing (500 at once)',
    start: async () => {
      const failing = await WebhookReceiver.start()
      failing.answerWith(() => ({ status: 500 }))
      return failing.url
    }
  }
]
const sqliteAndPostgres = backends.filter((backend) => backend.name !== 'memory')

describe.each(sqliteAndPostgres)('one misbehaving receiver next to a healthy one ($name)', (backend) => {
  it.each(variants)('still gets the healthy one each event within 2 s (p99) at 20 writes a second, with a $name receiver subscribed too', {
    timeout: WRITING_MS + SETTLE_MS + 30_000
  }, async ({ name, start }) => {
    // The production settings: 32 slots, 16 per subscription at most, 10 s per silent attempt, retries from 5 s, a poll every 500 ms.
    const app = await buildTestApp({
      store: await backend.open(),
      tokens: WEBHOOK_TEST_TOKENS,
      config: { webhooks: { ...DEFAULT_WEBHOOK_CONFIG, allowPrivateNetworks: true } }
    })
    await subscribeUrl(app, await start())
    const healthy = await WebhookReceiver.start()
    await subscribe(app, healthy)

    const answeredAt = await writeAtSteadyRate(app)
    const delays = await healthyDelays(healthy, answeredAt)

    console.log(`webhook isolation, ${backend.name}, ${name}: healthy receiver's delay over ${WRITES} writes: ` +
      `p50 ${delays.p50} ms, p99 ${delays.p99} ms, max ${delays.max} ms, lost ${delays.lost}`)
    expect(delays.lost).toBe(0)
    expect(delays.p99).toBeLessThanOrEqual(2000)
  })
})
