import { Worker } from 'node:worker_threads'
import {
  CLOSE, INDEX_SEARCH, packPlan, type CreateEffects, type ThreadWriteOperation, type WebhookArguments, type WebhookCommand, type WebhookRequest, type WebhookResults, type WriteEffect, type WriterMessage, type WriterReply,
  type WriterThreadData
} from './writer-protocol.js'
import type { WriteOperation } from '../write-operations.js'
import { UNNAMED_WRITER } from '../change-log.js'

export class SqliteWriteError extends Error {
  constructor (readonly code: string | undefined, message: string) {
    super(message)
    this.name = 'SqliteWriteError'
  }
}

/** A write as it crosses to the thread: a plan packed in one text where it can be (`packPlan`). */
function crossingForm (operation: WriteOperation): ThreadWriteOperation {
  if (operation.kind !== 'plan') return operation
  const packed = packPlan(operation.plan)
  return packed === undefined ? operation : { kind: 'packed-plan', packed, by: operation.by ?? UNNAMED_WRITER }
}

/** The code of the error of every request a writer thread owed when it exited or failed. */
export const WRITER_EXITED = 'SQLITE_WRITER_EXITED'

/** Whether `error` is a writer's exit: what it was doing may or may not have committed. */
export function writerExited (error: unknown): boolean {
  return error instanceof SqliteWriteError && error.code === WRITER_EXITED
}

/**
 * Where the writer thread starts: its compiled module beside this one (dist/); or, where this module
 * runs from its TypeScript source (vitest, tsx), a module that loads the thread's source through tsx.
 */
const THREAD_ENTRY = import.meta.url.endsWith('.ts')
  ? new URL('./writer-thread-from-source.mjs', import.meta.url)
  : new URL('./writer-thread.js', import.meta.url)

/**
 * The SQLite writer: a worker thread with its own connection that commits each batch (synchronous=FULL,
 * so the commit's fsync happens there). The event loop keeps serving requests, and gathering the next
 * batch, while a commit is on its way to the disk.
 */
export class SqliteWriter {
  private worker: Worker | undefined
  /** The answers the worker owes, in the order it will give them (it handles one message at a time). */
  private readonly pending: Array<{ resolve: (result: unknown) => void, reject: (error: Error) => void }> = []

  constructor (private readonly options: WriterThreadData) {}

  /** Commits one batch of plant writes; at most one is in flight (the group commit sees to that). A plan crosses packed. */
  write (operations: readonly WriteOperation[]): Promise<WriteEffect[]> {
    return this.send({ operations: operations.map(crossingForm) })
  }

  /** Commits one batch of creates (`packCreates`); at most one batch is in flight. */
  createAll (packed: string): Promise<CreateEffects> {
    return this.send({ creates: packed })
  }

  /** Deletes one chunk of the changes committed before `before` (writer-changes.ts); how many it deleted. */
  pruneChanges (before: number, limit: number): Promise<number> {
    return this.send({ pruneChanges: { before, limit } })
  }

  /** Indexes the plants the writes noted for the search index; how many it indexed. */
  indexSearch (): Promise<number> {
    return this.send(INDEX_SEARCH)
  }

  /** Runs one of the writer's webhook commands (writer-webhooks.ts) in its own transaction. */
  webhookCommand<Command extends WebhookCommand> (command: Command, argument: WebhookArguments[Command]): Promise<WebhookResults[Command]> {
    return this.send({ command, argument } as WebhookRequest)
  }

  async close (): Promise<void> {
    const worker = this.worker
    if (worker === undefined) return
    this.worker = undefined
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    worker.ref()
    worker.postMessage(CLOSE satisfies WriterMessage)
    await exited
  }

  /** Resolves with the thread's result for this message, whose type the message's kind tells. */
  private send<Result> (message: WriterMessage): Promise<Result> {
    return new Promise((resolve, reject) => {
      const worker = this.running()
      // While it owes an answer the thread keeps the process alive (a command line has nothing else that
      // does); idle, it does not hold a process that is done.
      if (this.pending.length === 0) worker.ref()
      this.pending.push({ resolve: resolve as (result: unknown) => void, reject })
      worker.postMessage(message)
    })
  }

  private running (): Worker {
    if (this.worker !== undefined) return this.worker
    const worker = new Worker(THREAD_ENTRY, { workerData: this.options satisfies WriterThreadData })
    worker.on('message', (reply: WriterReply) => {
      const pending = this.pending.shift()
      if (this.pending.length === 0) worker.unref()
      if ('result' in reply) pending?.resolve(reply.result)
      else pending?.reject(new SqliteWriteError(reply.error.code, reply.error.message))
    })
    // A writer that dies fails what it owes; the next message starts a new one.
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = undefined
      for (const pending of this.pending.splice(0)) pending.reject(new SqliteWriteError(WRITER_EXITED, error.message))
    }
    worker.on('error', fail)
    worker.on('exit', (code) => { if (this.pending.length > 0) fail(new Error(`the SQLite writer exited with code ${code}`)) })
    worker.unref()
    this.worker = worker
    return worker
  }
}
