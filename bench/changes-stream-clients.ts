import { connect, type Socket } from 'node:net'

/**
 * The changes part's stream clients (bench/parts/changes-streams.ts), a process of their own on the load
 * generator's core: many `GET /plants/changes` Server-Sent Events streams over plain sockets, read by a
 * parser that looks at bytes only (the event's `id:` and the plant's name, `w<send time>`, which
 * bench/changes-writer.ts gives it), so that it costs far less than the server's writes. For each event:
 * its latency, its arrival time less the write's send time, into a histogram of 0.1 ms steps, and its
 * `seq`, which must grow on every stream. Started by `fork`; told what to do by messages:
 *
 *   { type: 'open', url, token, streams }  opens the streams; answers { type: 'opened', opened, refused }
 *   { type: 'reset' }                      forgets what was counted; answers { type: 'reset' }
 *   { type: 'report' }                     answers { type: 'report', ...ClientsReport }
 *   { type: 'close' }                      closes every stream, answers { type: 'closed' } and exits
 */

export type ClientsOrder =
  | { readonly type: 'open', readonly url: string, readonly token: string, readonly streams: number }
  | { readonly type: 'reset' | 'report' | 'close' }

export interface ClientsReport {
  readonly streams: number
  /** Streams the server ended while they were counted. */
  readonly ended: number
  /** Events with a writer's send time, over all streams, since the reset. */
  readonly events: number
  /** The fewest and most such events one stream had. */
  readonly fewestOnAStream: number
  readonly mostOnAStream: number
  /** Events whose `seq` was not above the one before on their stream. */
  readonly outOfOrder: number
  /** Latency histogram: counts by 0.1 ms step (index = ms × 10), as [index, count] pairs of the steps that have any. */
  readonly histogram: Array<[number, number]>
  /** The clients' CPU time since the reset, in ms, and the wall time since, in ms. */
  readonly cpuMs: number
  readonly wallMs: number
}

const machineMs = () => performance.timeOrigin + performance.now()

const STEPS_PER_MS = 10
const HISTOGRAM_STEPS = 120_000 * STEPS_PER_MS
const ID = Buffer.from('\nid: ')
const NAME = Buffer.from('"name":"w')
const EVENT_END = Buffer.from('\n\n')
const HEAD_END = Buffer.from('\r\n\r\n')
const EMPTY: Buffer = Buffer.alloc(0)

interface Stream {
  readonly socket: Socket
  /** Bytes of an event not complete yet. */
  rest: Buffer
  headRead: boolean
  lastSeq: number
  events: number
  ended: boolean
}

const streams: Stream[] = []
let histogram = new Uint32Array(HISTOGRAM_STEPS + 1)
let outOfOrder = 0
let endedWhileCounted = 0
let resetAt = machineMs()
let cpuAtReset = process.cpuUsage()

/** Reads the events of a chunk; keeps an incomplete one's bytes for the next. */
function read (stream: Stream, chunk: Buffer): void {
  const arrived = machineMs()
  let bytes: Buffer = stream.rest.length === 0 ? chunk : Buffer.concat([stream.rest, chunk])
  let at = 0
  for (;;) {
    const idAt = bytes.indexOf(ID, at)
    if (idAt < 0) {
      // A marker cut at the end of the chunk: its start is kept.
      at = Math.max(at, bytes.length - ID.length)
      break
    }
    const end = bytes.indexOf(EVENT_END, idAt + ID.length)
    if (end < 0) {
      at = idAt
      break
    }
    let seq = 0
    for (let index = idAt + ID.length; ; index++) {
      const digit = (bytes[index] as number) - 48
      if (digit < 0 || digit > 9) break
      seq = seq * 10 + digit
    }
    if (seq <= stream.lastSeq) outOfOrder++
    stream.lastSeq = seq
    const nameAt = bytes.indexOf(NAME, idAt)
    if (nameAt >= 0 && nameAt < end) {
      let whole = 0
      let index = nameAt + NAME.length
      for (; ; index++) {
        const digit = (bytes[index] as number) - 48
        if (digit < 0 || digit > 9) break
        whole = whole * 10 + digit
      }
      let fraction = 0
      let scale = 1
      if (bytes[index] === 46) {
        for (index++; ; index++) {
          const digit = (bytes[index] as number) - 48
          if (digit < 0 || digit > 9) break
          fraction = fraction * 10 + digit
          scale *= 10
        }
      }
      const latency = arrived - (whole + fraction / scale)
      const step = Math.max(0, Math.min(HISTOGRAM_STEPS, Math.round(latency * STEPS_PER_MS)))
      histogram[step] = (histogram[step] as number) + 1
      stream.events++
    }
    // The event's last newline is the next one's marker's first byte.
    at = end + 1
  }
  stream.rest = at >= bytes.length ? EMPTY : Buffer.from(bytes.subarray(at))
  bytes = EMPTY
}

function open (url: URL, token: string): Promise<Stream | number> {
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname, port: Number(url.port), noDelay: true })
    const stream: Stream = { socket, rest: EMPTY, headRead: false, lastSeq: 0, events: 0, ended: false }
    let head: Buffer = EMPTY
    const onHead = (chunk: Buffer) => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk])
      const headEnd = head.indexOf(HEAD_END)
      if (headEnd < 0) return
      const status = Number(head.subarray(9, 12).toString())
      socket.off('data', onHead)
      if (status !== 200) {
        socket.destroy()
        resolve(status)
        return
      }
      stream.headRead = true
      socket.on('data', (data: Buffer) => { read(stream, data) })
      read(stream, head.subarray(headEnd + 2))
      resolve(stream)
    }
    socket.on('data', onHead)
    socket.once('error', () => { if (!stream.headRead) resolve(0) })
    socket.once('close', () => {
      if (!stream.headRead) resolve(0)
      else if (!stream.ended) {
        stream.ended = true
        endedWhileCounted++
      }
    })
    socket.write(`GET /plants/changes HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\n\r\n`)
  })
}

function reset (): void {
  histogram = new Uint32Array(HISTOGRAM_STEPS + 1)
  outOfOrder = 0
  endedWhileCounted = 0
  for (const stream of streams) stream.events = 0
  resetAt = machineMs()
  cpuAtReset = process.cpuUsage()
}

function report (): ClientsReport {
  const cpu = process.cpuUsage(cpuAtReset)
  const counts = streams.map((stream) => stream.events)
  const steps: Array<[number, number]> = []
  histogram.forEach((count, index) => { if (count > 0) steps.push([index, count]) })
  return {
    streams: streams.length,
    ended: endedWhileCounted,
    events: counts.reduce((sum, count) => sum + count, 0),
    fewestOnAStream: counts.length === 0 ? 0 : Math.min(...counts),
    mostOnAStream: counts.length === 0 ? 0 : Math.max(...counts),
    outOfOrder,
    histogram: steps,
    cpuMs: (cpu.user + cpu.system) / 1000,
    wallMs: machineMs() - resetAt
  }
}

process.on('message', (order: ClientsOrder) => {
  const answer = (message: object, then: () => void = () => {}) => { process.send?.(message, then) }
  if (order.type === 'open') {
    const url = new URL(order.url)
    const openAll = async () => {
      const refused: Record<string, number> = {}
      // A hundred at a time: the server's listen backlog is not the measurement.
      for (let start = 0; start < order.streams; start += 100) {
        const opened = await Promise.all(Array.from({ length: Math.min(100, order.streams - start) }, () => open(url, order.token)))
        for (const result of opened) {
          if (typeof result === 'number') refused[result] = (refused[result] ?? 0) + 1
          else streams.push(result)
        }
      }
      answer({ type: 'opened', opened: streams.length, refused })
    }
    openAll().catch((error: unknown) => { answer({ type: 'opened', opened: streams.length, refused: { [String(error)]: 1 } }) })
  } else if (order.type === 'reset') {
    reset()
    answer({ type: 'reset' })
  } else if (order.type === 'report') {
    answer({ type: 'report', ...report() })
  } else {
    for (const stream of streams) {
      stream.ended = true
      stream.socket.destroy()
    }
    answer({ type: 'closed' }, () => { process.exit(0) })
  }
})
