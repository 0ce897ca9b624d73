import { createServer as createHttpServer } from 'node:http'
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Harness } from '../harness.js'
import { TOKEN, type Target } from '../processes.js'
import { formatTable } from '../report.js'

/** How long a healthy event may still take after the last write before it counts as not arrived. */
const ARRIVAL_LIMIT_MS = 30_000

/** The healthy receiver's delays at one write rate, alone or with a silent receiver subscribed next to it. */
export interface IsolationFigures {
  readonly writesPerSecond: number
  readonly withSilentReceiver: boolean
  /** Acknowledged writes; each must cause one event. */
  readonly writes: number
  /** From a write's answer to its event's arrival at the healthy receiver, in ms. */
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** Events of acknowledged writes that had not arrived `ARRIVAL_LIMIT_MS` after the last write. */
  readonly notArrived: number
}

/**
 * A healthy receiver alone, then with a silent one (accepts the connection, never answers) subscribed
 * next to it, on a fresh SQLite service each time: POSTs of new plants paced at each rate, and each event's delay from its
 * write's answer to its arrival at the healthy receiver. Both receivers run in this process.
 */
export async function measureIsolation (harness: Harness, subscribe: (target: Target, receiverUrl: string) => Promise<string>, tokens: string): Promise<IsolationFigures[]> {
  const arrivedAt = new Map<number, number>()
  const healthy = createHttpServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const id = Number(/^\{"id":(\d+),/.exec(Buffer.concat(chunks).toString('utf8'))?.[1])
      if (!arrivedAt.has(id)) arrivedAt.set(id, Date.now())
      response.writeHead(204).end()
    })
  })
  const silentSockets = new Set<Socket>()
  const silent = createTcpServer((socket) => {
    silentSockets.add(socket)
    socket.resume()
    socket.on('close', () => silentSockets.delete(socket))
  })
  const healthyUrl = `http://127.0.0.1:${await listen(healthy)}`
  const silentUrl = `http://127.0.0.1:${await listen(silent)}`
  const seconds = harness.quick ? 5 : 20
  const figures: IsolationFigures[] = []
  try {
    const runs = [20, 200].flatMap((writesPerSecond) => [false, true].map((withSilentReceiver) => ({ writesPerSecond, withSilentReceiver })))
    for (const [index, { writesPerSecond, withSilentReceiver }] of runs.entries()) {
      const name = `sqlite-webhooks-${withSilentReceiver ? 'next-to-silent' : 'alone'}-${writesPerSecond}`
      const target = await harness.servers.startService(name, `sqlite:${join(harness.workFolder, `${name}.db`)}`,
        { PLANTSTORE_TOKENS: tokens, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
      if (withSilentReceiver) await subscribe(target, silentUrl)
      await subscribe(target, healthyUrl)
      const firstId = 1 + index * 1_000_000
      const answeredAt = await writeAtRate(target, firstId, writesPerSecond, seconds)
      const deadline = Date.now() + ARRIVAL_LIMIT_MS
      while ([...answeredAt.keys()].some((id) => !arrivedAt.has(id)) && Date.now() < deadline) await sleep(50)
      await harness.servers.stop(target)
      figures.push({ withSilentReceiver, ...figuresOf(writesPerSecond, answeredAt, arrivedAt) })
    }
  } finally {
    for (const socket of silentSockets) socket.destroy()
    healthy.closeAllConnections()
    await Promise.all([healthy, silent].map((server) => new Promise((resolve) => server.close(resolve))))
  }
  printIsolationTable(figures)
  return figures
}

async function listen (server: Server): Promise<number> {
  await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve) })
  return (server.address() as AddressInfo).port
}

/** POSTs new plants from `firstId` on, each paced from the start; returns when each was answered, by id. */
async function writeAtRate (target: Target, firstId: number, writesPerSecond: number, seconds: number): Promise<Map<number, number>> {
  const answeredAt = new Map<number, number>()
  const started = Date.now()
  const writes: Array<Promise<void>> = []
  for (let index = 0; index < writesPerSecond * seconds; index++) {
    const due = started + (index * 1000) / writesPerSecond
    if (due > Date.now()) await sleep(due - Date.now())
    const id = firstId + index
    writes.push(fetch(`${target.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: `{"id":${id},"name":"isolated ${id}"}`
    }).then(async (response) => {
      await response.arrayBuffer()
      // A refused write (503 under load shedding) has no event: only the acknowledged ones count.
      if (response.status === 200) answeredAt.set(id, Date.now())
      else process.stderr.write(`${target.name}: POST /plants answered ${response.status}\n`)
    }))
  }
  await Promise.all(writes)
  return answeredAt
}

function figuresOf (writesPerSecond: number, answeredAt: ReadonlyMap<number, number>, arrivedAt: ReadonlyMap<number, number>): Omit<IsolationFigures, 'withSilentReceiver'> {
  const delays = [...answeredAt].flatMap(([id, answered]) => {
    const arrived = arrivedAt.get(id)
    return arrived === undefined ? [] : [arrived - answered]
  }).sort((a, b) => a - b)
  const at = (fraction: number) => delays[Math.min(delays.length - 1, Math.ceil(fraction * delays.length) - 1)] ?? Number.NaN
  return { writesPerSecond, writes: answeredAt.size, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: delays.at(-1) ?? Number.NaN, notArrived: answeredAt.size - delays.length }
}

function printIsolationTable (figures: readonly IsolationFigures[]): void {
  const header = ['writes/s', 'silent receiver', 'writes', 'p50 ms', 'p99 ms', 'max ms', 'not arrived']
  const lines = figures.map((figure) => [figure.writesPerSecond, figure.withSilentReceiver ? 'yes' : 'no', figure.writes, figure.p50Ms, figure.p99Ms, figure.maxMs, figure.notArrived].map(String))
  process.stdout.write('\nSQLite, a healthy webhook receiver alone and next to a silent one: each event\'s delay from its write\'s answer to its arrival\n' +
    `${formatTable(header, lines, 1)}\n`)
}
