import { hostname } from 'node:os'
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify'
import { pino, type Bindings, type ChildLoggerOptions, type DestinationStream, type LevelWithSilentOrString, type LogFn } from 'pino'
import { jsonString } from '../json-text.js'
import { withoutSearchText } from './query-string.js'

/** Log paths that must never be written, whatever a future serializer adds. */
export const logRedaction = {
  paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'authorization'],
  censor: '[redacted]'
}

const INFO = pino.levels.values.info as number

/** When tracing is on: the ids of a request's span, which its line carries as `trace_id` and `span_id`. */
export type RequestTraceIds = (request: FastifyRequest) => { readonly traceId: string, readonly spanId: string } | undefined

/**
 * One log line per completed request (method, path, client address, status, time, and the name of the
 * token that authenticated it) instead of Fastify's two, which
 * measurably cost throughput. Request headers are never logged; errors of 5xx replies are logged with
 * their stack by the error envelope.
 *
 * Given the stream the logger writes to, the line is formatted here, in the exact form pino gives it
 * (same keys, same order), and the lines of one event-loop turn are written to that stream together.
 * Both matter (bench/results/2026-11-23-1052-fixed-cost.md): pino's general path costs several times this one for a line whose
 * fields are known, and the stream measures the byte length of all it holds on every write, so one
 * write per line costs more the more is waiting. Without a stream (pretty output for a terminal) the
 * line goes through the request's logger.
 */
export class CompletedRequestLog extends LogController {
  readonly #enabled: boolean
  readonly #destination: DestinationStream | undefined
  readonly #traceIdsOf: RequestTraceIds | undefined
  readonly #lineStart = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())},"reqId":`
  #pendingLines = ''
  #writeScheduled = false

  constructor (level: LevelWithSilentOrString, destination?: DestinationStream, traceIdsOf?: RequestTraceIds) {
    super()
    this.#enabled = (pino.levels.values[level] ?? Infinity) <= INFO
    this.#destination = destination
    this.#traceIdsOf = traceIdsOf
  }

  /** Hands the lines waiting for the end of this event-loop turn to the stream now. */
  readonly writePending = (): void => {
    this.#writeScheduled = false
    if (this.#pendingLines === '') return
    const lines = this.#pendingLines
    this.#pendingLines = ''
    this.#destination?.write(lines)
  }

  override incomingRequest (): void {}

  override requestCompleted (_error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (!this.#enabled) return
    // The client's address (from X-Forwarded-For as TRUST_PROXY allows); unknown once a client that left
    // before its answer has closed the socket, and then absent from the line.
    const remoteAddress: string | undefined = request.ip
    const traceIds = this.#traceIdsOf === undefined ? undefined : this.#traceIdsOf(request)
    const listing = request.plantListing
    const batch = request.plantBatch
    const stream = request.changeStream
    if (this.#destination === undefined) {
      reply.log.info({
        ...(traceIds === undefined ? {} : { trace_id: traceIds.traceId, span_id: traceIds.spanId }),
        method: request.method,
        url: withoutSearchText(request.url),
        remoteAddress,
        statusCode: reply.statusCode,
        responseTime: reply.elapsedTime,
        ...(request.accessToken === null ? {} : { tokenName: request.accessToken.name }),
        ...(listing === null ? {} : { sort: listing.sort, searched: listing.page.q !== undefined, counted: listing.counted }),
        ...(batch === null ? {} : { operations: batch.operations, applied: batch.applied }),
        ...(stream === null ? {} : { events: stream.events, streamEnd: stream.reason })
      }, 'request completed')
      return
    }
    this.#pendingLines +=
      `{"level":30,"time":${Date.now()}${this.#lineStart}${jsonString(request.id)},` +
      // Where pino's mixin puts them on the lines logged through request.log. Hexadecimal: nothing to escape.
      (traceIds === undefined ? '' : `"trace_id":"${traceIds.traceId}","span_id":"${traceIds.spanId}",`) +
      `"method":${jsonString(request.method)},` +
      `"url":${jsonString(withoutSearchText(request.url))},` +
      (remoteAddress === undefined ? '' : `"remoteAddress":${jsonString(remoteAddress)},`) +
      `"statusCode":${reply.statusCode},"responseTime":${reply.elapsedTime.toFixed(3)},` +
      (request.accessToken === null ? '' : `"tokenName":${jsonString(request.accessToken.name)},`) +
      (listing === null ? '' : `"sort":"${listing.sort}","searched":${listing.page.q !== undefined},"counted":${listing.counted},`) +
      (batch === null ? '' : `"operations":${batch.operations},"applied":${batch.applied},`) +
      (stream === null ? '' : `"events":${stream.events},"streamEnd":"${stream.reason}",`) +
      '"msg":"request completed"}\n'
    if (!this.#writeScheduled) {
      this.#writeScheduled = true
      setImmediate(this.writePending)
    }
  }

  override routeNotFound (): void {}
}

/**
 * Fastify's `childLoggerFactory`: `request.log` binds the request id, but pino's child is made only when
 * something logs through it. Most requests log nothing but their completed line, which does not need it.
 */
export function lazyRequestLogger (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(logger, bindings, options)
}

class LazyChildLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined

  constructor (
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions
  ) {}

  private get logger (): FastifyBaseLogger {
    this.#child ??= this.parent.child(this.bindings, this.options)
    return this.#child
  }

  get level (): LevelWithSilentOrString { return this.#child?.level ?? this.parent.level }
  set level (level: LevelWithSilentOrString) { this.logger.level = level }

  fatal (...args: Parameters<LogFn>): void { this.logger.fatal(...args) }
  error (...args: Parameters<LogFn>): void { this.logger.error(...args) }
  warn (...args: Parameters<LogFn>): void { this.logger.warn(...args) }
  info (...args: Parameters<LogFn>): void { this.logger.info(...args) }
  debug (...args: Parameters<LogFn>): void { this.logger.debug(...args) }
  trace (...args: Parameters<LogFn>): void { this.logger.trace(...args) }
  silent (): void {}

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options)
  }
}

const LOG_CHUNK_BYTES = 4096
const LOG_FLUSH_INTERVAL_MS = 1000

export interface BufferedLogOutput {
  readonly stream: ReturnType<typeof pino.destination>
  /** Writes out what is buffered now, without waiting for a full chunk; `written` is called once it is. */
  readonly flush: (written?: () => void) => void
  readonly stopFlushing: () => void
}

/**
 * Standard output written asynchronously in chunks of at least 4 KiB: pino's setup for the least
 * overhead. Writing every line on its own costs a thread-pool round trip per request, which measured
 * about a fifth of POST throughput (docs/explanations/decisions.md, "The hot path"). A timer flushes every second, so the lines
 * of a quiet service still show up promptly; pino writes out the rest when the process exits. A
 * process killed with SIGKILL can lose its last second of log lines, never data.
 */
export function bufferedStandardOutput (): BufferedLogOutput {
  const stream = pino.destination({ dest: 1, sync: false, minLength: LOG_CHUNK_BYTES })
  const flush = (written?: () => void) => { stream.flush(written === undefined ? undefined : () => { written() }) }
  const timer = setInterval(flush, LOG_FLUSH_INTERVAL_MS).unref()
  return { stream, flush, stopFlushing: () => { clearInterval(timer) } }
}
