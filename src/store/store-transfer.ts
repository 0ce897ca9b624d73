/**
 * What moves a whole store beside its service, each backend providing what it can: a backup of the store
 * as one file and its restore (SQLite), and the two ends of a copy (every backend but memory). Opened by
 * `openStoreTransfer` (open-store.ts). The process around it (the atomic file, the copy's loop and
 * marker, NDJSON) lives in src/transfer/ and the command line.
 */
import type { CopyConnectionOptions, CopyTarget, StoreSnapshot } from './store-copy.js'

/** A store as messages name it, and as a copy tells it from every other. */
export interface StoreLocation {
  /** Its URL without a password. */
  readonly shown: string
  /**
   * What tells this store from every other, in a copy's marker and to refuse copying a store into itself:
   * `sqlite:<real path>`, or `postgres://host:port/database`.
   */
  readonly identity: string
  /** The URL's password, if it holds one, so that no message can show it. */
  readonly secrets: readonly string[]
}

export interface StoreTransfer {
  readonly location: StoreLocation
  /**
   * The store as one file, which `command` works on; throws StoreTransferUnsupportedError, saying what to
   * use instead, for a backend whose store is not one file.
   */
  file (command: 'backup' | 'restore'): StoreFile
  /** The store read in one snapshot, for a copy from it; a store that does not exist is refused, never created. */
  openCopySource (options: CopyConnectionOptions): Promise<StoreSnapshot>
  /** The store a copy writes into, created when it does not exist. */
  copyTarget (options: CopyConnectionOptions): CopyTarget
}

/** What a store holds, counted for the line a backup or a restore ends with. */
export interface StoreContents {
  readonly plants: number
  /** Live, expired and revoked alike; a release 1.0.0 store has its one generated token. */
  readonly accessTokens: number
  readonly webhookSubscriptions: number
  /** Webhook events recorded and not yet delivered (nor given up on). */
  readonly pendingWebhookEvents: number
  readonly schemaVersion: number
}

export interface PreparedRestore {
  /** What the restored store holds, at this release's schema version. */
  readonly contents: StoreContents
  /** The schema version the backup was made at. */
  readonly backupVersion: number
}

/** A store that is one file: backed up into another file while its service runs, restored from one while none does. */
export interface StoreFile {
  /** The store's file. */
  readonly path: string
  /**
   * Copies the store into `copyPath`, a file that does not exist yet, as one consistent snapshot, while
   * a service keeps using the store; the store is only read. Throws, naming the store, when it is
   * missing, not a plantstore store or of a newer schema.
   */
  backUp (copyPath: string): Promise<StoreContents>
  /** Why `backupPath` cannot be restored, judged from its size and header alone; undefined when it looks like a whole store. */
  backupProblem (backupPath: string): string | undefined
  /**
   * Makes at `copyPath` (which must not exist) the store that restoring the backup gives: checked,
   * brought up to this release's schema, written through to the disk. The backup is only read. Throws,
   * naming the backup, when it cannot be restored.
   */
  prepareRestore (backupPath: string, copyPath: string): PreparedRestore
  /**
   * Runs `rename`, which gives a prepared store the store's name, while no process can open the store;
   * a store that a process has open (a running service) is refused and left as it was.
   */
  replace (rename: () => void): void
  /** Removes the files the database keeps beside a database file at `path` (its log, its journal), where there are any. */
  removeSidecars (path: string): void
  /** Whether a failed write failed for want of space. */
  isDiskFull (error: unknown): boolean
}

/** The backend cannot do this; the message says what to use instead. */
export class StoreTransferUnsupportedError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'StoreTransferUnsupportedError'
  }
}
