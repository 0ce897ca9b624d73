import { Worker } from 'node:worker_threads'
import type { PageRequest, PlantFilter, PlantPage } from '../plant-store.js'
import { StoreUnavailableError } from '../plant-store.js'
import { SEARCH_THREAD_READY, type SearchReply, type SearchRequest, type SearchThreadData } from './search-protocol.js'

/** Where the search thread starts: as for the writer thread (writer.ts), compiled or from its source. */
const THREAD_ENTRY = import.meta.url.endsWith('.ts')
  ? new URL('./search-thread-from-source.mjs', import.meta.url)
  : new URL('./search-thread.js', import.meta.url)

interface Job {
  readonly request: SearchRequest
  readonly resolve: (reply: SearchReply) => void
  readonly reject: (error: Error) => void
}

/** Error codes of a read that means "not now" (the file being replaced, a disk error): a 503. */
const TRANSIENT_CODES = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|PROTOCOL)/

/**
 * Searches and counts, read by a worker thread with a read-only connection of its own (search-thread.ts),
 * one at a time: their cost grows with the names they read, and on the event loop a search that reads a
 * million names would hold every other request up. One that runs longer than the statement timeout ends
 * with a StoreUnavailableError (a 503 with Retry-After), and the thread is ended with it and started again
 * for the next.
 */
export class Searcher {
  #worker: Worker | undefined
  readonly #queue: Job[] = []
  #running: Job | undefined
  #timer: NodeJS.Timeout | undefined
  /** Whether the thread has opened its connection: a search is timed from then, not from the thread's start. */
  #ready = false

  constructor (private readonly file: string, private readonly statementTimeoutMs: number) {}

  async page (request: PageRequest): Promise<PlantPage> {
    const reply = await this.run({ page: request })
    return (reply as { page: PlantPage }).page
  }

  async count (filter: PlantFilter): Promise<number> {
    const reply = await this.run({ count: { ...(filter.tag === undefined ? {} : { tag: filter.tag }), ...(filter.q === undefined ? {} : { q: filter.q }) } })
    return (reply as { count: number }).count
  }

  /** Ends the thread; searches still waiting get a StoreUnavailableError. */
  async close (): Promise<void> {
    for (const job of this.#queue.splice(0)) job.reject(new StoreUnavailableError('the store is closing'))
    const worker = this.#worker
    this.#worker = undefined
    if (worker !== undefined) await worker.terminate()
  }

  private run (request: SearchRequest): Promise<SearchReply> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject })
      if (this.#running === undefined) this.next()
    })
  }

  private next (): void {
    const job = this.#queue.shift()
    this.#running = job
    if (job === undefined) {
      this.#worker?.unref()
      return
    }
    const worker = this.started()
    worker.ref()
    if (this.#ready) this.startTimer(worker)
    worker.postMessage(job.request)
  }

  private started (): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(THREAD_ENTRY, { workerData: { file: this.file } satisfies SearchThreadData })
    this.#ready = false
    worker.on('message', (reply: SearchReply) => {
      if (this.#worker !== worker) return
      if (reply === SEARCH_THREAD_READY) {
        this.#ready = true
        if (this.#running !== undefined) this.startTimer(worker)
        return
      }
      const job = this.#running
      clearTimeout(this.#timer)
      if (job === undefined) return
      if ('error' in reply) job.reject(errorOf(reply.error))
      else job.resolve(reply)
      this.next()
    })
    const failed = (error: Error) => {
      if (this.#worker !== worker) return
      this.#worker = undefined
      clearTimeout(this.#timer)
      this.#running?.reject(new StoreUnavailableError(`the SQLite search thread stopped (${error.message})`, { cause: error }))
      this.next()
    }
    worker.on('error', failed)
    worker.on('exit', (code) => { failed(new Error(`exit code ${code}`)) })
    this.#worker = worker
    return worker
  }

  private startTimer (worker: Worker): void {
    this.#timer = setTimeout(() => { this.timedOut(worker) }, this.statementTimeoutMs)
  }

  private timedOut (worker: Worker): void {
    if (this.#worker !== worker) return
    this.#worker = undefined
    const job = this.#running
    worker.terminate().catch(() => {})
    job?.reject(new StoreUnavailableError(`the search took longer than the statement timeout (${this.statementTimeoutMs} ms)`))
    this.next()
  }
}

function errorOf ({ code, message }: { code: string | undefined, message: string }): Error {
  if (code !== undefined && TRANSIENT_CODES.test(code)) return new StoreUnavailableError(`SQLite is unavailable (${code})`)
  const error = new Error(message)
  return Object.assign(error, { code })
}
