import type { ServerResponse } from 'node:http'
import type { FastifyBaseLogger } from 'fastify'
import type { ChangeLog, ChangeRecord } from '../store/change-log.js'
import { changeEvent, passesFilter, type ChangeFilter } from './change-json.js'

/** How many changes one read of the log takes, the follower's and a catching-up stream's. */
const READ_PAGE = 1000
/** How often the follower reads the log without a wake (other processes' writes, a pooler without LISTEN). */
const POLL_MS = 1000
/** How often streams are checked: their tokens, and whether a keep-alive is due. */
export const TICK_MS = 500
/** An idle stream gets a comment line this often at most; the tick makes it at least every 15 s. */
export const KEEP_ALIVE_MS = 14_000
/**
 * A stream whose client does not read is closed once more than this, of what it was given before, still
 * waits to be sent when more comes (it resumes with Last-Event-ID): it holds at most this and one page.
 */
export const MAX_BUFFERED_BYTES = 128 * 1024
/** What a stream's first lines tell an EventSource: reconnect after 2 s. */
const STREAM_PREAMBLE = 'retry: 2000\n\n'

/** Lets the event loop run (sockets write, other requests go on) before going on. */
const nextTurn = () => new Promise<void>((resolve) => { setImmediate(resolve) })

/** What the metrics learn of the streams. */
export interface ChangeStreamObserver {
  /** Called with a function that counts the open streams. */
  countStreamsWith (read: () => number): void
  /** A change was handed to the live streams, this long after its commit. */
  changeSent (lagSeconds: number): void
  streamClosed (reason: StreamEnd): void
}

export type StreamEnd = 'client' | 'slow_client' | 'token' | 'expired' | 'shutdown'

export interface ChangeStreamsOptions {
  readonly changes: ChangeLog
  readonly retentionMs: number
  /** CHANGES_STREAMS_MAX. */
  readonly max: number
  readonly logger: FastifyBaseLogger
  readonly observer?: ChangeStreamObserver | undefined
  readonly pollMs?: number | undefined
  readonly keepAliveMs?: number | undefined
  readonly maxBufferedBytes?: number | undefined
}

/** A request for a stream: where it starts, what it wants, and whether its token is still good. */
export interface StreamRequest {
  /** The stream starts after this `seq`; undefined: at the head. */
  readonly after: bigint | undefined
  readonly filter: ChangeFilter
  readonly stillAuthorized: () => boolean
}

interface OpenStream {
  readonly response: ServerResponse
  readonly filter: ChangeFilter
  readonly stillAuthorized: () => boolean
  /** Every change up to this `seq` that passes the filter has been written to the stream. */
  after: bigint
  /** Fed by the follower; until then the stream reads the log itself. */
  live: boolean
  lastWriteAt: number
  /** The change events written to it. */
  events: number
  readonly onEnd: ((end: StreamEnding) => void) | undefined
}

/** How a stream ended: why, and how many change events it was given. */
export interface StreamEnding { readonly reason: StreamEnd, readonly events: number }

/**
 * The change streams of this instance. One follower reads the log after the last change it handed out,
 * when the store tells of a commit (`ChangeLog.watch`: this process's writes, other instances' NOTIFYs)
 * and every second, and writes each change to every live stream whose filter it passes: one read of the
 * database however many streams are open. A stream that starts behind the follower reads the log itself
 * until it has caught up, a page at a time as its client takes them, and joins it then. The follower runs
 * only while a stream is open.
 */
export class ChangeStreams {
  private readonly streams = new Set<OpenStream>()
  /** Streams being opened: counted against the maximum before they are open. */
  private opening = 0
  /** The last `seq` the follower handed out; undefined while it is not following. */
  private position: bigint | undefined
  private starting: Promise<bigint> | undefined
  private reading = false
  private readAgain = false
  private ticker: NodeJS.Timeout | undefined
  private poller: NodeJS.Timeout | undefined
  private unwatch: (() => void) | undefined
  private closed = false
  private lastFailureLogAt = 0
  private readonly pollMs: number
  private readonly keepAliveMs: number
  private readonly maxBufferedBytes: number

  constructor (private readonly options: ChangeStreamsOptions) {
    this.pollMs = options.pollMs ?? POLL_MS
    this.keepAliveMs = options.keepAliveMs ?? KEEP_ALIVE_MS
    this.maxBufferedBytes = options.maxBufferedBytes ?? MAX_BUFFERED_BYTES
    options.observer?.countStreamsWith(() => this.streams.size)
  }

  /** Whether one more stream may open now (CHANGES_STREAMS_MAX). */
  get full (): boolean {
    return this.closed || this.streams.size + this.opening >= this.options.max
  }

  /**
   * Opens a stream: resolves with `expired` (nothing written) when changes after its start are no
   * longer kept, or with `start`, to be called with the response once its head is written: from then
   * on the stream is fed, and ends when the response closes, telling `onEnd`. `full` must be false.
   */
  async prepare (request: StreamRequest): Promise<
    { readonly status: 'expired' } | { readonly status: 'ready', readonly start: (response: ServerResponse, onEnd?: (end: StreamEnding) => void) => void }
  > {
    this.opening++
    let pending = true
    try {
      const following = this.position !== undefined
      const position = await this.follow()
      // "At the head": after every change committed so far, which a running follower may not have read yet
      // (another instance's, until its NOTIFY or the next poll), lest the stream start with older changes.
      const after = request.after ?? (following ? await this.options.changes.head() : position)
      let backlog: readonly ChangeRecord[] = []
      if (after < position) {
        const page = await this.options.changes.read(this.readRequest(after, request.filter))
        if (page.status === 'expired') return { status: 'expired' }
        backlog = page.changes
      }
      pending = false
      return {
        status: 'ready',
        start: (response, onEnd) => {
          this.opening--
          // The service began to stop, or the client left, while the stream was being prepared: it ends at once.
          if (this.closed || response.destroyed) {
            response.end()
            response.socket?.end()
            this.stopIfIdle()
            onEnd?.({ reason: this.closed ? 'shutdown' : 'client', events: 0 })
            return
          }
          const stream: OpenStream = {
            response, filter: request.filter, stillAuthorized: request.stillAuthorized, after, live: false, lastWriteAt: Date.now(), events: 0, onEnd
          }
          this.streams.add(stream)
          response.on('close', () => { this.remove(stream, 'client') })
          this.write(stream, STREAM_PREAMBLE)
          this.catchUp(stream, backlog, after < position ? position : undefined).catch(this.logFailure)
        }
      }
    } finally {
      if (pending) {
        this.opening--
        this.stopIfIdle()
      }
    }
  }

  /** Ends every stream at once and opens no more: the service is stopping, and never waits for streams. */
  closeAll (): void {
    this.closed = true
    for (const stream of [...this.streams]) this.end(stream, 'shutdown')
    this.stopFollowing()
  }

  /** Starts following the log at its head unless it is followed already; the follower's position. */
  private async follow (): Promise<bigint> {
    if (this.position !== undefined) return this.position
    this.starting ??= this.options.changes.head().then((head) => {
      this.position = head
      this.unwatch = this.options.changes.watch(() => { this.pump().catch(this.logFailure) })
      this.ticker = setInterval(() => { this.tick() }, TICK_MS).unref()
      // A timer of its own: on the tick's, a poll came up to a tick late (1.5 s, where 2 s is the promise).
      this.poller = setInterval(() => { this.pump().catch(this.logFailure) }, this.pollMs).unref()
      return head
    }).finally(() => { this.starting = undefined })
    return this.starting
  }

  private stopIfIdle (): void {
    if (this.streams.size === 0 && this.opening === 0) this.stopFollowing()
  }

  private stopFollowing (): void {
    clearInterval(this.ticker)
    this.ticker = undefined
    clearInterval(this.poller)
    this.poller = undefined
    this.unwatch?.()
    this.unwatch = undefined
    this.position = undefined
  }

  private readRequest (after: bigint, filter: ChangeFilter) {
    return { after, limit: READ_PAGE, tag: filter.tag, types: filter.types, keptSince: Date.now() - this.options.retentionMs }
  }

  /**
   * Writes the stream's backlog and reads on until it has reached the follower, then makes it live. The
   * changes up to the follower's position when a read starts are committed, so that read sees them: once
   * a page is not full, the stream has every change up to that position. (Undefined: not behind.)
   */
  private async catchUp (stream: OpenStream, firstPage: readonly ChangeRecord[], positionAtFirstRead: bigint | undefined): Promise<void> {
    if (positionAtFirstRead === undefined) {
      stream.live = true
      return
    }
    let page = firstPage
    let reachedByRead = positionAtFirstRead
    try {
      while (this.streams.has(stream)) {
        this.send(stream, page)
        if (page.length < READ_PAGE && reachedByRead > stream.after) stream.after = reachedByRead
        if (stream.after >= (this.position ?? stream.after)) break
        // Paced by the client: the next page is read once this one is on its way (a client that does not
        // read is cut by the next write, or by the keep-alive).
        await this.untilSent(stream.response)
        if (!this.streams.has(stream)) return
        if (stream.after >= (this.position ?? stream.after)) break
        reachedByRead = this.position ?? stream.after
        const next = await this.options.changes.read(this.readRequest(stream.after, stream.filter))
        if (next.status === 'expired') {
          this.end(stream, 'expired')
          return
        }
        page = next.changes
      }
      stream.live = true
    } catch (error) {
      this.logFailure(error)
      this.end(stream, 'client')
    }
  }

  /** Reads what was committed after the follower's position and hands it to the live streams. */
  private async pump (): Promise<void> {
    if (this.reading) {
      this.readAgain = true
      return
    }
    this.reading = true
    try {
      do {
        this.readAgain = false
        for (;;) {
          const position = this.position
          if (position === undefined) return
          const page = await this.options.changes.read({ after: position, limit: READ_PAGE, keptSince: 0 })
          if (this.position !== position) return
          if (page.status === 'expired') {
            // Pruned past the follower: its streams would miss changes. They end and resume, and hear 410.
            for (const stream of [...this.streams]) this.end(stream, 'expired')
            const head = await this.options.changes.head()
            // (Unless the follower stopped with its last stream, or started again meanwhile.)
            if (this.position === position) this.position = head
            return
          }
          const { changes } = page
          if (changes.length === 0) break
          this.fanOut(changes)
          // Ending a stream (a slow client) may have stopped the follower with the last one: it must stay
          // stopped, or the next stream would take it for running, and nothing would feed it.
          if (this.position !== position) return
          this.position = (changes.at(-1) as ChangeRecord).seq
          if (changes.length < READ_PAGE) break
          // The sockets send what they were given (Node sends a response's writes of one turn together) before the next page.
          await nextTurn()
        }
      } while (this.readAgain)
    } catch (error) {
      // The database is out of reach: streams stay open, and the next wake or poll reads on from here.
      this.logFailure(error)
    } finally {
      this.reading = false
    }
  }

  private fanOut (changes: readonly ChangeRecord[]): void {
    const events = changes.map(changeEvent)
    const now = Date.now()
    if (this.options.observer !== undefined) for (const change of changes) this.options.observer.changeSent((now - change.at) / 1000)
    for (const stream of this.streams) {
      if (stream.live) this.send(stream, changes, events)
    }
  }

  /** Writes the changes the stream has not had and its filter passes, in one write. */
  private send (stream: OpenStream, changes: readonly ChangeRecord[], events?: readonly string[]): void {
    let text = ''
    let passed = 0
    changes.forEach((change, index) => {
      if (change.seq <= stream.after) return
      stream.after = change.seq
      if (!passesFilter(change, stream.filter)) return
      text += events?.[index] ?? changeEvent(change)
      passed++
    })
    if (text === '') return
    this.write(stream, text)
    if (this.streams.has(stream)) stream.events += passed
  }

  /**
   * Writes to the stream, unless more than the bound of what it was given before still waits to be
   * sent: then its client does not read, and is cut. What one write adds is never held against it (a
   * page of changes may pass the bound by itself, and Node sends the writes of one turn together), so
   * a stream holds at most the bound and one page.
   */
  private write (stream: OpenStream, text: string): void {
    if (stream.response.writableLength > this.maxBufferedBytes) {
      this.end(stream, 'slow_client')
      return
    }
    stream.response.write(text)
    stream.lastWriteAt = Date.now()
  }

  /** Resolves once the response has sent what waits past the bound (or closed); else on the next turn. */
  private async untilSent (response: ServerResponse): Promise<void> {
    if (response.writableLength <= this.maxBufferedBytes || response.destroyed) {
      await nextTurn()
      return
    }
    await new Promise<void>((resolve) => {
      const done = () => {
        response.off('drain', done)
        response.off('close', done)
        resolve()
      }
      response.on('drain', done)
      response.on('close', done)
    })
  }

  private tick (): void {
    const now = Date.now()
    for (const stream of this.streams) {
      if (!stream.stillAuthorized()) this.end(stream, 'token')
      else if (now - stream.lastWriteAt >= this.keepAliveMs) this.write(stream, keepAlive(stream))
    }
  }

  private end (stream: OpenStream, reason: StreamEnd): void {
    if (!this.remove(stream, reason)) return
    const { response } = stream
    // A client that does not read would hold a graceful end open: its connection goes at once.
    if (reason === 'slow_client' || response.writableLength > 0) {
      response.destroy()
      return
    }
    response.end()
    response.socket?.end()
  }

  private remove (stream: OpenStream, reason: StreamEnd): boolean {
    if (!this.streams.delete(stream)) return false
    this.options.observer?.streamClosed(reason)
    stream.onEnd?.({ reason, events: stream.events })
    this.stopIfIdle()
    return true
  }

  private readonly logFailure = (error: unknown): void => {
    const now = Date.now()
    if (now - this.lastFailureLogAt < 30_000) return
    this.lastFailureLogAt = now
    this.options.logger.warn(`change streams cannot read the change log (${(error as Error).message}); they stay open and go on once it answers`)
  }
}

/**
 * A keep-alive comment; for a filtered stream also the `seq` it has read up to, as an event id without
 * data, which moves a client's Last-Event-ID (an EventSource's too) past the changes it did not want, so a
 * rare tag's resume point does not age past the retention.
 */
function keepAlive (stream: { readonly filter: ChangeFilter, readonly after: bigint }): string {
  return stream.filter.tag === undefined && stream.filter.types === undefined ? ': keep-alive\n\n' : `: keep-alive\nid: ${stream.after}\n\n`
}
