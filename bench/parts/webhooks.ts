import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { median, record, roundRatios, summarize, type Row, type Samples } from '../figures.js'
import { PAIRED_ROUNDS, type Harness, type Part } from '../harness.js'
import { TOKEN, type Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell } from '../report.js'
import { measureIsolation } from './webhook-isolation.js'

const WEBHOOKS_NONE = 'sqlite-no-subscription'
const WEBHOOKS_OUTBOX = 'sqlite-webhooks-recorded'
const WEBHOOKS_DELIVERING = 'sqlite-webhooks-delivered'
/** The bound: POST with an active subscription within 10 % of POST without. */
const WEBHOOK_TOLERANCE = 0.1
const WEBHOOK_ADMIN_TOKEN = `bench-admin-${randomBytes(16).toString('hex')}`
/** A drain that takes longer than this is reported as not finished. */
const DRAIN_LIMIT_MS = 120_000

interface DeliveryFigures {
  /** Deliveries the receiver counted while the load ran, per second. */
  readonly deliveriesPerSecond: number
  /** Events recorded but not delivered yet when the load stopped. */
  readonly backlogAtEnd: number
  /** From the end of the load until nothing was pending, in seconds. */
  readonly drainSeconds: number
  /** Deliveries per second while draining. */
  readonly drainPerSecond: number
}

/**
 * What an active subscription costs a POST, and whether delivery keeps up. Three SQLite services: one
 * without a subscription; one with a subscription whose events it records but does not deliver
 * (WEBHOOK_DELIVERY=false: the outbox row riding the write's batch, nothing else); one that also
 * delivers them to a local receiver (on the load generator's core, counting what arrives). Interleaved
 * rounds of POST; after each round the delivering service drains its backlog while nothing else runs,
 * timed. Ratios are medians of each round's own ratio to the service without a subscription.
 */
export async function compareWebhooks (harness: Harness): Promise<Row[]> {
  const { servers, workFolder } = harness
  const receiver = await servers.start('webhook-receiver', [process.execPath, '--import', 'tsx', 'bench/webhook-receiver.ts'], {}, 1)
  const tokens = `${TOKEN},name=bench-admin;scopes=admin;${WEBHOOK_ADMIN_TOKEN}`
  const none = await servers.startService(WEBHOOKS_NONE, `sqlite:${join(workFolder, 'webhooks-none.db')}`, { PLANTSTORE_TOKENS: tokens })
  const recorded = await servers.startService(WEBHOOKS_OUTBOX, `sqlite:${join(workFolder, 'webhooks-recorded.db')}`,
    { PLANTSTORE_TOKENS: tokens, WEBHOOK_DELIVERY: 'false', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
  const delivering = await servers.startService(WEBHOOKS_DELIVERING, `sqlite:${join(workFolder, 'webhooks-delivered.db')}`,
    { PLANTSTORE_TOKENS: tokens, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
  await subscribeReceiver(recorded, receiver.url)
  const subscription = await subscribeReceiver(delivering, receiver.url)
  const targets = [none, recorded, delivering]
  for (const target of targets) await harness.measure(target, 'post', 1)
  await drain(delivering, subscription)

  const samples: Samples = new Map()
  const figures: DeliveryFigures[] = []
  for (let round = 1; round <= harness.roundsOf(PAIRED_ROUNDS); round++) {
    for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
      const receivedBefore = await receivedCount(receiver.url)
      const startedAt = Date.now()
      const sample = await harness.measure(target, 'post', harness.durationSeconds)
      const loadSeconds = (Date.now() - startedAt) / 1000
      record(samples, target.name, sample)
      harness.logSample(round, `${target.name}/post`, sample)
      if (target !== delivering) continue
      const receivedDuring = await receivedCount(receiver.url) - receivedBefore
      const backlogAtEnd = await pendingEvents(delivering, subscription)
      const drainSeconds = await drain(delivering, subscription)
      figures.push({ deliveriesPerSecond: receivedDuring / loadSeconds, backlogAtEnd, drainSeconds, drainPerSecond: drainSeconds === 0 ? 0 : backlogAtEnd / drainSeconds })
      process.stderr.write(`round ${round} deliveries: ${Math.round(receivedDuring / loadSeconds)}/s during the load, backlog ${backlogAtEnd}, drained in ${drainSeconds.toFixed(1)} s\n`)
    }
  }
  const counted = await receiverCounts(receiver.url)
  for (const target of [...targets, receiver]) await servers.stop(target)
  const isolation = await measureIsolation(harness, subscribeReceiver, tokens)

  const pairedRatio = (name: string, measure: 'rps' | 'serverCpuUs') => median(roundRatios(samples, name, WEBHOOKS_NONE, measure))
  const rows = targets.map((target) => ({
    target: target.name,
    load: 'post',
    ...summarize(samples.get(target.name) ?? [], 1),
    ratio: Number(pairedRatio(target.name, 'rps').toFixed(3)),
    cpuRatio: Number(pairedRatio(target.name, 'serverCpuUs').toFixed(3)),
    against: WEBHOOKS_NONE,
    ...(target === delivering
      ? {
          deliveries: {
            perSecondDuringLoad: Math.round(median(figures.map((figure) => figure.deliveriesPerSecond))),
            backlogAtEnd: Math.round(median(figures.map((figure) => figure.backlogAtEnd))),
            drainSeconds: Number(median(figures.map((figure) => figure.drainSeconds)).toFixed(2)),
            perSecondWhileDraining: Math.round(median(figures.map((figure) => figure.drainPerSecond))),
            received: counted.received,
            duplicated: counted.received - counted.distinct
          },
          isolation
        }
      : {})
  }))
  printWebhooksTable(harness, rows)
  return rows
}

async function subscribeReceiver (target: Target, receiverUrl: string): Promise<string> {
  const response = await fetch(`${target.url}/admin/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${WEBHOOK_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${receiverUrl}/hooks`, events: ['plant.created'] })
  })
  if (response.status !== 201) throw new Error(`${target.name}: POST /admin/webhooks answered ${response.status}: ${await response.text()}`)
  return (await response.json() as { id: string }).id
}

async function pendingEvents (target: Target, subscription: string): Promise<number> {
  const response = await fetch(`${target.url}/admin/webhooks/${subscription}`, { headers: { authorization: `Bearer ${WEBHOOK_ADMIN_TOKEN}` } })
  return (await response.json() as { pending: number }).pending
}

/** Waits until the subscription has nothing pending; returns how long that took, in seconds. */
async function drain (target: Target, subscription: string): Promise<number> {
  const startedAt = Date.now()
  while (await pendingEvents(target, subscription) > 0) {
    if (Date.now() - startedAt > DRAIN_LIMIT_MS) throw new Error(`${target.name}: the webhook backlog did not drain within ${DRAIN_LIMIT_MS / 1000} s`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return (Date.now() - startedAt) / 1000
}

async function receiverCounts (receiverUrl: string): Promise<{ received: number, distinct: number }> {
  return await (await fetch(`${receiverUrl}/count`)).json() as { received: number, distinct: number }
}

async function receivedCount (receiverUrl: string): Promise<number> {
  return (await receiverCounts(receiverUrl)).received
}

export function printWebhooksTable (harness: Harness, rows: Array<Row & { deliveries?: Record<string, number> }>): void {
  const header = ['target', 'req/s', 'req/s ÷', 'µs/req', 'CPU ÷', 'p99 ms', 'errors', `${harness.generator.name} CPU`, `within ${WEBHOOK_TOLERANCE * 100} %`]
  const lines = rows.map((row) => [row.target, String(row.rps), row.ratio.toFixed(3), String(row.serverCpuUs), row.cpuRatio.toFixed(3),
    String(row.p99), String(row.errors), generatorCell(row.generatorCpuShare, row.valid),
    row.target === WEBHOOKS_NONE ? '' : row.ratio >= 1 - WEBHOOK_TOLERANCE ? 'yes' : 'no'])
  const deliveries = rows.find((row) => row.deliveries !== undefined)?.deliveries
  process.stdout.write(`\nSQLite, POST with and without a webhook subscription; medians of ${describeRounds(harness.roundsOf(PAIRED_ROUNDS), harness.durationSeconds)}, ` +
    `ratios the medians of each round's ratio to ${WEBHOOKS_NONE}\n${formatTable(header, lines, 1)}\n`)
  if (deliveries !== undefined) {
    process.stdout.write(`deliveries: ${deliveries.perSecondDuringLoad}/s during the load, backlog ${deliveries.backlogAtEnd} when it stopped, ` +
      `drained in ${deliveries.drainSeconds} s (${deliveries.perSecondWhileDraining}/s); the receiver got ${deliveries.received}, ` +
      `${deliveries.duplicated} of them a second time\n`)
  }
}

export const webhooksPart: Part = {
  name: 'webhooks',
  owns: (row) => row.against === WEBHOOKS_NONE,
  compare: compareWebhooks
}
