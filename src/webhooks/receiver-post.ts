import type { Dispatcher } from 'undici'

/** Of a receiver's answer only this much is read; a longer one is cut off with its connection. */
const MAX_ANSWER_BYTES = 4096

/** Why an answer was cut off: never seen by the caller, who has the status code by then. */
class AnswerCutOff extends Error {}

/**
 * A status that arrived later than the POST's time-out: a failed attempt, like no answer at all. The
 * agent's headersTimeout runs on undici's coarse timers, which may fire up to half a second late.
 */
export class AnswerTooLate extends Error {}

/** One delivery's POST. */
export interface ReceiverPost {
  readonly origin: string
  /** The path with its query, as undici's `request` makes it of a URL. */
  readonly path: string
  /** Names and values in turn. */
  readonly headers: string[]
  readonly body: string
  /**
   * Counted from when the request is written: a status arriving later is a failure (AnswerTooLate), and
   * an answer's body still arriving then is cut off.
   */
  readonly timeoutMs: number
}

/**
 * The POSTs under way, so that a stop can cut them short; each resolves with the receiver's status
 * code once its answer has been read and dropped, so that the connection serves the next delivery, or
 * cut off with its connection when it is longer than MAX_ANSWER_BYTES or still arriving at its time-out.
 *
 * A handler of undici's dispatcher rather than its `request`: that made a stream, an async resource and
 * an abort listener per delivery to read an answer that is most often empty (bench/results/2026-11-26-1412-issue-26-fast-day-costs.md).
 */
export class ReceiverPosts {
  private readonly underWay = new Set<AnswerReader>()
  private stoppedWith: Error | undefined

  /** `dispatcherOf` is asked at every POST: it may load the dispatcher at the first. */
  constructor (private readonly dispatcherOf: () => Promise<Dispatcher>) {}

  async post ({ origin, path, headers, body, timeoutMs }: ReceiverPost): Promise<number> {
    // Before the dispatcher: a POST made after a stop need not load it to be refused.
    if (this.stoppedWith !== undefined) throw this.stoppedWith
    const dispatcher = await this.dispatcherOf()
    return await new Promise((resolve, reject) => {
      const reader = new AnswerReader(timeoutMs, this.underWay, resolve, reject)
      if (this.stoppedWith !== undefined) {
        reject(this.stoppedWith)
        return
      }
      this.underWay.add(reader)
      dispatcher.dispatch({ origin, path, method: 'POST', headers, body }, reader)
    })
  }

  /** Cuts every POST under way short with `reason`, and any made later. */
  stop (reason: Error): void {
    this.stoppedWith = reason
    for (const reader of this.underWay) reader.cancel(reason)
  }
}

class AnswerReader implements Dispatcher.DispatchHandler {
  private statusCode = 0
  private bytes = 0
  private controller: Dispatcher.DispatchController | undefined
  private cancelledWith: Error | undefined
  private settled = false
  /** Set when the request is written (epoch ms). */
  private deadline = Infinity

  constructor (
    private readonly timeoutMs: number,
    private readonly underWay: Set<AnswerReader>,
    private readonly resolve: (statusCode: number) => void,
    private readonly reject: (error: Error) => void
  ) {}

  /** Aborts the POST now or, still waiting for a connection, as soon as it has one. */
  cancel (reason: Error): void {
    this.cancelledWith = reason
    this.controller?.abort(reason)
  }

  onRequestStart (controller: Dispatcher.DispatchController): void {
    this.deadline = Date.now() + this.timeoutMs
    this.controller = controller
    if (this.cancelledWith !== undefined) controller.abort(this.cancelledWith)
  }

  onResponseStart (controller: Dispatcher.DispatchController, statusCode: number): void {
    // 1xx answers are informational; the final one follows.
    if (statusCode < 200) return
    if (Date.now() > this.deadline) {
      const tooLate = new AnswerTooLate(`HTTP ${statusCode} later than ${this.timeoutMs / 1000} s`)
      this.onResponseError(controller, tooLate)
      controller.abort(tooLate)
      return
    }
    this.statusCode = statusCode
  }

  onResponseData (controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bytes += chunk.length
    if (this.bytes > MAX_ANSWER_BYTES || Date.now() > this.deadline) {
      this.answered()
      controller.abort(new AnswerCutOff())
    }
  }

  onResponseEnd (): void {
    this.answered()
  }

  onResponseError (_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return
    this.settled = true
    this.underWay.delete(this)
    this.reject(error)
  }

  private answered (): void {
    if (this.settled) return
    this.settled = true
    this.underWay.delete(this)
    this.resolve(this.statusCode)
  }
}
