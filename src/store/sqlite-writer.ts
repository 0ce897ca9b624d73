import { Worker } from 'node:worker_threads'
import type { PlantRow } from './plant-store.js'
import { sqliteDriverPath } from './sqlite-driver.js'
import type { WriteOperation } from './write-operations.js'

/**
 * What the writer thread reports for one write: a create stored, or the row it met; for a change, the
 * row its id had before it (its outcome follows from that row and `decideChange`).
 */
export type WriteEffect =
  | { readonly inserted: true }
  | { readonly inserted: false, readonly existing: PlantRow | undefined }
  | { readonly before: PlantRow | undefined }

export class SqliteWriteError extends Error {
  constructor (readonly code: string | undefined, message: string) {
    super(message)
    this.name = 'SqliteWriteError'
  }
}

export interface SqliteWriterOptions {
  readonly file: string
  readonly busyTimeoutMs: number
}

// Runs in the worker thread. It executes statements in one transaction per batch; what the results mean
// (created, replayed, conflict, stale, …) is decided by the adapter on the main thread. A change applies
// the rules of decideChange (write-operations.ts) to its row: a conditional one only while the row is
// the expected one; a put stores its plant; a patch merges into an existing row; a delete removes it.
const WRITER_SOURCE = `
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'
const Database = createRequire(workerData.driverPath)(workerData.driverPath)
const db = new Database(workerData.file)
db.pragma('journal_mode = WAL')
db.pragma('synchronous = FULL')
db.pragma('busy_timeout = ' + workerData.busyTimeoutMs)
// Durability rests on this connection's settings: refuse to write at all without them.
if (db.pragma('journal_mode', { simple: true }) !== 'wal' || db.pragma('synchronous', { simple: true }) !== 2) {
  throw new Error('the SQLite writer could not set journal_mode=WAL and synchronous=FULL')
}
db.defaultSafeIntegers(true)
const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING')
const select = db.prepare('SELECT id, name, tag FROM plants WHERE id = ?')
const rename = db.prepare('UPDATE plants SET name = ? WHERE id = ?')
const update = db.prepare('UPDATE plants SET name = ?, tag = ? WHERE id = ?')
const remove = db.prepare('DELETE FROM plants WHERE id = ?')
const tagOf = (plant) => plant.tag === undefined ? null : plant.tag
const isRow = (row, plant) => row === undefined ? plant === undefined : plant !== undefined && row.name === plant.name && row.tag === tagOf(plant)
// Writes only what changed: an update that leaves the tag alone leaves the tag index alone too.
function store (id, before, name, tag) {
  if (before === undefined) insert.run(id, name, tag)
  else if (before.tag !== tag) update.run(name, tag, id)
  else if (before.name !== name) rename.run(name, id)
}
function change (operation) {
  const id = operation.kind === 'put' ? operation.plant.id : operation.id
  const before = select.get(id)
  if (operation.expected !== undefined && !isRow(before, operation.expected.plant)) return { before }
  if (operation.kind === 'delete') {
    if (before !== undefined) remove.run(id)
  } else if (operation.kind === 'put') {
    store(id, before, operation.plant.name, tagOf(operation.plant))
  } else if (before !== undefined) {
    const { name = before.name, tag = before.tag } = operation.patch
    store(id, before, name, tag)
  }
  return { before }
}
const write = db.transaction((operations) => operations.map((operation) => {
  if (operation.kind !== 'create') return change(operation)
  const { id, name, tag } = operation.plant
  if (insert.run(id, name, tag === undefined ? null : tag).changes === 1) return { inserted: true }
  return { inserted: false, existing: select.get(id) }
}))
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close()
    parentPort.close()
    return
  }
  try {
    parentPort.postMessage({ effects: write.immediate(message) })
  } catch (error) {
    parentPort.postMessage({ error: { code: error.code, message: error.message } })
  }
})
`

/**
 * The SQLite writer: a worker thread with its own connection that commits each batch (synchronous=FULL,
 * so the commit's fsync happens there). The event loop keeps serving requests, and gathering the next
 * batch, while a commit is on its way to the disk.
 */
export class SqliteWriter {
  private worker: Worker | undefined
  private pending: { resolve: (effects: WriteEffect[]) => void, reject: (error: Error) => void } | undefined

  constructor (private readonly options: SqliteWriterOptions) {}

  /** Commits one batch; at most one is in flight (the group commit sees to that). */
  write (operations: readonly WriteOperation[]): Promise<WriteEffect[]> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject }
      this.running().postMessage(operations)
    })
  }

  async close (): Promise<void> {
    const worker = this.worker
    if (worker === undefined) return
    this.worker = undefined
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    worker.postMessage('close')
    await exited
  }

  private running (): Worker {
    if (this.worker !== undefined) return this.worker
    const worker = new Worker(WRITER_SOURCE, {
      eval: true,
      workerData: { ...this.options, driverPath: sqliteDriverPath }
    })
    worker.on('message', (message: { effects?: WriteEffect[], error?: { code?: string, message: string } }) => {
      const pending = this.pending
      this.pending = undefined
      if (message.effects !== undefined) pending?.resolve(message.effects)
      else pending?.reject(new SqliteWriteError(message.error?.code, message.error?.message ?? 'the write failed'))
    })
    // A writer that dies fails its batch; the next batch starts a new one.
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = undefined
      const pending = this.pending
      this.pending = undefined
      pending?.reject(new SqliteWriteError('SQLITE_WRITER_EXITED', error.message))
    }
    worker.on('error', fail)
    worker.on('exit', (code) => { if (this.pending !== undefined) fail(new Error(`the SQLite writer exited with code ${code}`)) })
    worker.unref()
    this.worker = worker
    return worker
  }
}
