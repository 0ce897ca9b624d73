/**
 * The SQLite writer thread (started by SqliteWriter, writer.ts): its own connection commits the plant
 * writes and the webhook bookkeeping, so no write of this process waits for SQLite's lock, or for a
 * commit's fsync, on the event loop. It answers each message in turn.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { openWriterConnection } from './connection.js'
import { plantWrites } from './writer-plants.js'
import { webhookWrites } from './writer-webhooks.js'
import { searchIndexing } from './search-index.js'
import { changePruning } from './writer-changes.js'
import {
  CLOSE, INDEX_SEARCH, type WebhookCommand, type WebhookRequest, type WriterMessage, type WriterReply, type WriterThreadData
} from './writer-protocol.js'

if (parentPort === null) throw new Error('writer-thread.js runs in the worker thread that SqliteWriter starts')
const port = parentPort
const { file, busyTimeoutMs } = workerData as WriterThreadData

const db = openWriterConnection(file, busyTimeoutMs)
const plants = plantWrites(db)
const webhooks = webhookWrites(db)
const search = searchIndexing(db)
const pruneChanges = changePruning(db)

function runCommand<Command extends WebhookCommand> (request: WebhookRequest<Command>) {
  return webhooks[request.command](request.argument)
}

function errorOf (error: unknown): { code: string | undefined, message: string } {
  const code = (error as { code?: unknown } | undefined)?.code
  return { code: typeof code === 'string' ? code : undefined, message: error instanceof Error ? error.message : String(error) }
}

port.on('message', (message: WriterMessage) => {
  if (message === CLOSE) {
    db.close()
    port.close()
    return
  }
  try {
    const result = message === INDEX_SEARCH
      ? search.indexPending()
      : 'creates' in message
        ? plants.createAll(message.creates)
        : 'operations' in message
          ? plants.write(message.operations)
          : 'pruneChanges' in message ? pruneChanges(message.pruneChanges) : runCommand(message)
    port.postMessage({ result } satisfies WriterReply)
  } catch (error) {
    port.postMessage({ error: errorOf(error) } satisfies WriterReply)
  }
})
