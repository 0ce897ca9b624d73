/**
 * The SQLite search thread (started by Searcher, searcher.ts): searches and counts, whose cost grows
 * with what they match, on a read-only connection of their own, so that none holds the event loop. It
 * answers each message in turn; the searcher ends it when one takes longer than the statement timeout.
 */
import { parentPort, workerData } from 'node:worker_threads'
import Database from './driver.js'
import { PlantPages } from './plant-pages.js'
import { SEARCH_THREAD_READY, type SearchReply, type SearchRequest, type SearchThreadData } from './search-protocol.js'

if (parentPort === null) throw new Error('search-thread.js runs in the worker thread that Searcher starts')
const port = parentPort
const { file } = workerData as SearchThreadData

const db = new Database(file, { readonly: true, fileMustExist: true })
db.defaultSafeIntegers(true)
const pages = new PlantPages(db)
port.postMessage(SEARCH_THREAD_READY satisfies SearchReply)

port.on('message', (request: SearchRequest) => {
  try {
    port.postMessage(('page' in request ? { page: pages.page(request.page) } : { count: pages.count(request.count) }) satisfies SearchReply)
  } catch (error) {
    const code = (error as { code?: unknown } | undefined)?.code
    port.postMessage({ error: { code: typeof code === 'string' ? code : undefined, message: (error as Error).message } } satisfies SearchReply)
  }
})
