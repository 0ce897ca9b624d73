import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import { StringDecoder } from 'node:string_decoder'
import { onTestFinished } from 'vitest'

/** One event as an EventSource dispatches it (W3C HTML, "Server-sent events", §9.2.6). */
export interface ServerSentEvent {
  /** The `event:` field, `message` when none. */
  readonly type: string
  /** The `data:` lines joined with LF. */
  readonly data: string
  /** The last `id:` seen, by this event or an earlier one (the buffer persists across events). */
  readonly lastEventId: string
}

/**
 * The W3C event-stream parser, fed text as it arrives: lines end with CRLF, LF or CR (even split across
 * chunks), one leading BOM is dropped, `:` lines are comments, a field's value loses one leading space,
 * `data` lines accumulate, `id` with a NULL is ignored, `retry` only when all ASCII digits, and a blank
 * line dispatches (nothing when no data). A last event without its blank line is never dispatched.
 */
export class EventStreamParser {
  readonly events: ServerSentEvent[] = []
  /** Comment lines, without their leading colon. */
  readonly comments: string[] = []
  /** The reconnection time the stream set, in ms. */
  retry: number | undefined
  private line = ''
  private started = false
  private afterCarriageReturn = false
  private dataBuffer = ''
  private eventType = ''
  private lastEventIdBuffer = ''

  constructor (private readonly onEvent: (event: ServerSentEvent) => void = () => {}) {}

  push (text: string): void {
    let chunk = text
    if (!this.started && chunk.length > 0) {
      this.started = true
      if (chunk.startsWith('\uFEFF')) chunk = chunk.slice(1)
    }
    for (const character of chunk) {
      if (this.afterCarriageReturn) {
        this.afterCarriageReturn = false
        if (character === '\n') continue
      }
      if (character === '\r' || character === '\n') {
        this.afterCarriageReturn = character === '\r'
        this.processLine(this.line)
        this.line = ''
      } else {
        this.line += character
      }
    }
  }

  private processLine (line: string): void {
    if (line === '') {
      this.dispatch()
      return
    }
    if (line.startsWith(':')) {
      this.comments.push(line.slice(1))
      return
    }
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    switch (field) {
      case 'event':
        this.eventType = value
        break
      case 'data':
        this.dataBuffer += `${value}\n`
        break
      case 'id':
        if (!value.includes('\0')) this.lastEventIdBuffer = value
        break
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.retry = Number(value)
        break
      default:
        // Any other field is ignored.
    }
  }

  private dispatch (): void {
    if (this.dataBuffer === '') {
      this.eventType = ''
      return
    }
    const event: ServerSentEvent = {
      type: this.eventType === '' ? 'message' : this.eventType,
      data: this.dataBuffer.endsWith('\n') ? this.dataBuffer.slice(0, -1) : this.dataBuffer,
      lastEventId: this.lastEventIdBuffer
    }
    this.dataBuffer = ''
    this.eventType = ''
    this.events.push(event)
    this.onEvent(event)
  }
}

/** How a stream's response ended, and when. */
export interface StreamEnding {
  /** `end`: the server ended the response (the chunked body's last chunk); `closed`: the connection went without it. */
  readonly how: 'end' | 'closed'
  /** performance.now() */
  readonly atMs: number
  /** The same moment as Date.now(). */
  readonly wallMs: number
}

/** A live event stream as a client reads it: the answer's head, then what arrives, parsed. */
export interface EventStreamReader {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly parser: EventStreamParser
  readonly events: readonly ServerSentEvent[]
  /** Everything received of the body so far, as text. */
  readonly text: () => string
  /** Resolves when the response has ended, however it ended. */
  readonly ended: Promise<StreamEnding>
  /** Whether it has ended. */
  readonly hasEnded: () => boolean
  /** Resolves with the events once there are at least `count`; rejects after `timeoutMs`, saying what arrived. */
  readonly waitForEvents: (count: number, timeoutMs?: number) => Promise<readonly ServerSentEvent[]>
  /** Resolves once `condition` holds, checked on each chunk; rejects after `timeoutMs`. */
  readonly waitFor: (what: string, condition: () => boolean, timeoutMs?: number) => Promise<void>
  /** Resolves with the body once the response has ended (for an answer that is not a stream: 410, 503…). */
  readonly body: (timeoutMs?: number) => Promise<string>
  /** The client leaves: destroys the connection. */
  readonly close: () => void
}

export interface OpenStreamOptions {
  /** Request headers; `accept: text/event-stream` is added. */
  readonly headers?: Record<string, string>
  /** How long to wait for the answer's head. */
  readonly timeoutMs?: number
}

/**
 * GETs `url` (a 127.0.0.1 address) with `Accept: text/event-stream` on a connection of its own and
 * resolves once the answer's head has arrived; its body is parsed as it comes. The connection is
 * destroyed when the test ends.
 */
export function openEventStream (url: string, options: OpenStreamOptions = {}): Promise<EventStreamReader> {
  const timeoutMs = options.timeoutMs ?? 10_000
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, {
      method: 'GET',
      agent: false,
      headers: { accept: 'text/event-stream', ...options.headers }
    })
    onTestFinished(() => { request.destroy() })
    const timer = setTimeout(() => {
      request.destroy()
      reject(new Error(`no answer to GET ${url} within ${timeoutMs} ms`))
    }, timeoutMs)
    request.once('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    request.once('response', (response) => {
      clearTimeout(timer)
      resolve(readEventStream(response, () => { request.destroy() }))
    })
    request.end()
  })
}

function readEventStream (response: IncomingMessage, destroy: () => void): EventStreamReader {
  const waiters = new Set<() => void>()
  const wake = () => { for (const waiter of [...waiters]) waiter() }
  const parser = new EventStreamParser()
  const decoder = new StringDecoder('utf8')
  let received = ''
  let ending: StreamEnding | undefined
  const ended = new Promise<StreamEnding>((resolve) => {
    const finish = (how: StreamEnding['how']) => {
      if (ending !== undefined) return
      ending = { how, atMs: performance.now(), wallMs: Date.now() }
      resolve(ending)
      wake()
    }
    response.once('end', () => { finish('end') })
    response.once('close', () => { finish(response.complete ? 'end' : 'closed') })
    response.once('error', () => { finish('closed') })
  })
  response.on('data', (chunk: Buffer) => {
    const text = decoder.write(chunk)
    received += text
    parser.push(text)
    wake()
  })

  const waitFor = (what: string, condition: () => boolean, timeoutMs = 10_000) => new Promise<void>((resolve, reject) => {
    const check = () => {
      if (condition()) {
        done()
        resolve()
      } else if (ending !== undefined) {
        done()
        reject(new Error(`the stream ended (${ending.how}) before ${what}; received:\n${received}`))
      }
    }
    const timer = setTimeout(() => {
      done()
      reject(new Error(`not within ${timeoutMs} ms: ${what}; received:\n${received}`))
    }, timeoutMs)
    const done = () => {
      clearTimeout(timer)
      waiters.delete(check)
    }
    waiters.add(check)
    check()
  })

  return {
    status: response.statusCode ?? 0,
    headers: response.headers,
    parser,
    events: parser.events,
    text: () => received,
    ended,
    hasEnded: () => ending !== undefined,
    waitFor,
    async waitForEvents (count, timeoutMs) {
      await waitFor(`${count} event(s)`, () => parser.events.length >= count, timeoutMs)
      return parser.events
    },
    async body (timeoutMs = 10_000) {
      await waitFor('the end of the answer', () => ending !== undefined, timeoutMs)
      return received
    },
    close: destroy
  }
}

/** The `seq`s of change events (their ids), as numbers. */
export const seqsOf = (events: readonly ServerSentEvent[]): number[] => events.map((event) => Number(event.lastEventId))
