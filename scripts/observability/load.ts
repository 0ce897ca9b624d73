/**
 * A bounded, mixed load on a running plantstore, for watching the dashboard: creates, reads, list pages,
 * changes, deletes, 404s (a missing plant and an unknown path) and 401s, at a fixed rate per stage, with a
 * webhook subscription to a receiver started here (it answers 204, and 503 to one attempt in 40, so
 * retries show). Loopback only; it stops by itself after the stages and the backlog has drained.
 *
 *   npx tsx scripts/observability/load.ts --url http://127.0.0.1:3000 --token <admin+read+write token> \
 *     --stages 45:800,60:2000,45:1200 --connections 8
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { parseArgs } from 'node:util'
import autocannon from 'autocannon'

const { values: options } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:3000' },
    token: { type: 'string' },
    stages: { type: 'string', default: '45:800,60:2000,45:1200' },
    connections: { type: 'string', default: '8' },
    'drain-seconds': { type: 'string', default: '30' }
  }
})
const token = options.token ?? process.env.PLANTSTORE_TOKEN
if (token === undefined) throw new Error('pass --token (or PLANTSTORE_TOKEN): a token with plants:read, plants:write and admin')
const base = new URL(options.url)
if (!['127.0.0.1', 'localhost', '[::1]'].includes(base.hostname)) throw new Error('the load goes to loopback only')
const stages = options.stages.split(',').map((stage) => {
  const [seconds, rate] = stage.split(':').map(Number)
  return { seconds: seconds as number, rate: rate as number }
})

// --- the webhook receiver --------------------------------------------------------------------------------
let attempts = 0
let refused = 0
const receiver = createServer((request, response) => {
  request.resume().on('end', () => {
    attempts++
    if (attempts % 40 === 0) {
      refused++
      response.writeHead(503).end()
    } else {
      response.writeHead(204).end()
    }
  })
})
await new Promise<void>((resolve) => { receiver.listen(0, '127.0.0.1', resolve) })
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/plantstore-events`

const authorization = `Bearer ${token}`
const subscription = await fetch(new URL('/admin/webhooks', base), {
  method: 'POST',
  headers: { authorization, 'content-type': 'application/json' },
  body: JSON.stringify({ url: receiverUrl })
})
if (subscription.status !== 201) throw new Error(`POST /admin/webhooks answered ${subscription.status}: ${await subscription.text()}`)
const { id: subscriptionId } = await subscription.json() as { id: string }

// --- the mix -----------------------------------------------------------------------------------------------
const TAGS = ['green', 'shade', 'indoor', 'succulent', 'herb']
let nextId = 1
let nextDelete = 1
const recentId = () => Math.max(1, nextId - 1 - Math.floor(Math.random() * 20))
const json = { authorization, 'content-type': 'application/json' }
const mergePatch = { authorization, 'content-type': 'application/merge-patch+json' }
const read = { authorization }
type Request = autocannon.Request

const create: Request = {
  method: 'POST',
  path: '/plants',
  setupRequest: (request) => {
    const id = nextId++
    return { ...request, headers: json, body: JSON.stringify({ id, name: `plant-${id}`, tag: TAGS[id % TAGS.length] }) }
  }
}
const getOne: Request = { method: 'GET', setupRequest: (request) => ({ ...request, path: `/plants/${recentId()}`, headers: read }) }
const mix: Request[] = [
  create,
  getOne,
  create,
  getOne,
  { method: 'GET', path: '/plants?limit=20', headers: read },
  create,
  { method: 'GET', setupRequest: (request) => ({ ...request, path: `/plants/${9_000_000_000_000 + nextId}`, headers: read }) }, // 404
  {
    method: 'PATCH',
    setupRequest: (request) => ({ ...request, path: `/plants/${recentId()}`, headers: mergePatch, body: JSON.stringify({ tag: TAGS[Math.floor(Math.random() * TAGS.length)] }) })
  },
  { method: 'GET', path: '/plants?tag=green&limit=20', headers: read },
  { method: 'GET', path: '/plants?limit=5' }, // 401: no token
  getOne,
  {
    method: 'PUT',
    setupRequest: (request) => {
      const id = recentId()
      return { ...request, path: `/plants/${id}`, headers: json, body: JSON.stringify({ name: `plant-${id}-renamed` }) }
    }
  },
  { method: 'DELETE', setupRequest: (request) => ({ ...request, path: `/plants/${nextDelete++}`, headers: read }) },
  { method: 'GET', path: '/no-such-page', headers: read }, // 404, route "unmatched"
  create
]

const summaries = []
for (const { seconds, rate } of stages) {
  const result = await autocannon({
    url: base.origin,
    connections: Number(options.connections),
    overallRate: rate,
    duration: seconds,
    requests: mix
  })
  const statuses = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => [code, count]))
  const summary = {
    seconds,
    targetRate: rate,
    requestsPerSecond: Math.round(result.requests.average),
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    statuses,
    errors: result.errors,
    timeouts: result.timeouts
  }
  summaries.push(summary)
  console.log(JSON.stringify(summary))
}

// --- let the deliveries catch up, then report ----------------------------------------------------------------
const deadline = Date.now() + Number(options['drain-seconds']) * 1000
let pending = -1
while (Date.now() < deadline) {
  const state = await fetch(new URL(`/admin/webhooks/${subscriptionId}`, base), { headers: read })
  pending = (await state.json() as { pending: number }).pending
  if (pending === 0) break
  await new Promise((resolve) => setTimeout(resolve, 1000))
}
console.log(JSON.stringify({ plantsCreated: nextId - 1, webhookAttempts: attempts, webhookRefused: refused, webhookPendingAtEnd: pending }))
await new Promise<void>((resolve) => { receiver.close(() => { resolve() }) })
