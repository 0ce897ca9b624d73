import { Agent, request } from 'node:http'

/**
 * The changes part's writer (bench/parts/changes*.ts), a process of its own on the load generator's
 * core: `POST /plants` of new plants at a steady rate (open loop: a request is sent when its time comes,
 * whether or not the earlier ones were answered), each plant named `w<its send time>` so that a stream
 * client can tell how long its change took to reach it. Started by `fork`; told what to do in one
 * message, it answers with every request's send time and latency, and exits.
 *
 * Times are `performance.timeOrigin + performance.now()` in ms: the wall clock at µs resolution, the
 * same in every process of the machine.
 */

export interface WriterOrder {
  readonly url: string
  readonly token: string
  /** Requests per second. */
  readonly rate: number
  /** How long it writes at most: a `{ type: 'stop' }` message ends it sooner. */
  readonly seconds: number
  /** The first plant id; the next ones follow. */
  readonly firstId: number
  /** The most requests in flight at once (the agent's sockets); more wait in the agent, their wait counted. */
  readonly connections: number
}

export interface WriterReport {
  /** Requests sent, and answered 200. */
  readonly sent: number
  readonly ok: number
  /** Answers other than 200 (a 503 when the service sheds load), and failed requests, by status (0: failed). */
  readonly failures: Record<string, number>
  /** Per request, in sending order: its send time (ms since the start) and its latency in ms (-1: not answered 200). */
  readonly sentAtMs: number[]
  readonly latencyMs: number[]
  /** The start, in the machine's ms (see above). */
  readonly startedAt: number
  /** Its own CPU time ÷ the wall time of the run. */
  readonly cpuShare: number
}

export const machineMs = () => performance.timeOrigin + performance.now()

async function write (order: WriterOrder): Promise<WriterReport> {
  const agent = new Agent({ keepAlive: true, maxSockets: order.connections })
  const target = new URL('/plants', order.url)
  let total = Math.round(order.rate * order.seconds)
  const sentAtMs: number[] = []
  const latencyMs: number[] = []
  const failures: Record<string, number> = {}
  let ok = 0
  let answered = 0
  const startedAt = machineMs()
  const cpuBefore = process.cpuUsage()
  let allAnswered: () => void = () => {}
  const finished = new Promise<void>((resolve) => { allAnswered = resolve })
  const answer = (index: number, status: number) => {
    if (status === 200) {
      ok++
      latencyMs[index] = machineMs() - startedAt - (sentAtMs[index] as number)
    } else {
      failures[status] = (failures[status] ?? 0) + 1
    }
    if (++answered >= total && sent >= total) allAnswered()
  }
  const send = (index: number) => {
    const at = machineMs()
    sentAtMs[index] = at - startedAt
    latencyMs[index] = -1
    const body = `{"id":${order.firstId + index},"name":"w${at.toFixed(3)}","tag":"bench"}`
    const outgoing = request(target, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${order.token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
    }, (response) => {
      response.resume()
      response.once('end', () => { answer(index, response.statusCode ?? 0) })
    })
    outgoing.setTimeout(30_000, () => { outgoing.destroy(new Error('timed out')) })
    outgoing.once('error', () => { answer(index, 0) })
    outgoing.end(body)
  }
  let sent = 0
  process.on('message', (message: { type?: string }) => {
    if (message.type === 'stop') total = Math.max(sent, answered + 1)
  })
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor((machineMs() - startedAt) / 1000 * order.rate) + 1)
      while (sent < due) send(sent++)
      if (sent >= total) resolve()
      else setTimeout(tick, 1)
    }
    tick()
  })
  // Every request answered, or 30 s more at most.
  await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, 35_000))])
  const cpu = process.cpuUsage(cpuBefore)
  agent.destroy()
  return { sent, ok, failures, sentAtMs, latencyMs, startedAt, cpuShare: (cpu.user + cpu.system) / 1000 / (machineMs() - startedAt) }
}

if (process.send !== undefined) {
  process.once('message', (order: WriterOrder) => {
    write(order).then((report) => {
      process.send?.(report, () => { process.exit(0) })
    }, (error: unknown) => {
      process.stderr.write(`changes writer: ${(error as Error).stack ?? String(error)}\n`)
      process.exit(1)
    })
  })
}
