import { counted } from '../counted.js'
import type { StoreContents, StoreFile } from '../store/store-transfer.js'
import type { AtomicFile } from '../transfer/atomic-file.js'
import type { CommandArguments } from './command.js'
import type { HelpInvocation } from './options.js'

/** What `plantstore backup` and `restore` share: their FILE, a half-made store file's removal, the words of their line. */

export interface FileInvocation<C extends 'backup' | 'restore'> {
  readonly command: C
  readonly file: string
  readonly force: boolean
}

/** Reads `FILE [--force]`; `what` says what FILE is, for the line that asks for it. */
export function parseFileCommand<C extends 'backup' | 'restore'> (command: C, args: CommandArguments, what: string): FileInvocation<C> | HelpInvocation {
  const parsed = args.options({ force: { type: 'boolean' } }, true)
  if (parsed.command === 'help') return parsed
  const [file, ...more] = parsed.positionals
  if (file === undefined || file === '') throw parsed.fail(`${command} needs FILE, ${what}`)
  if (more.length > 0) throw parsed.fail(`${command} takes one FILE, got ${parsed.positionals.length}`)
  return { command, file, force: parsed.values.force === true }
}

/** Removes a store file being written under its temporary name, with the files the database keeps next to it. */
export function abandonStoreFile (file: AtomicFile, store: StoreFile): void {
  file.abandon()
  store.removeSidecars(file.temporaryPath)
}

/** `2 plants, 1 access token, 0 webhook subscriptions and 0 pending webhook events`. */
export function describeContents (contents: StoreContents): string {
  return `${counted(contents.plants, 'plant')}, ${counted(contents.accessTokens, 'access token')}, ` +
    `${counted(contents.webhookSubscriptions, 'webhook subscription')} and ${counted(contents.pendingWebhookEvents, 'pending webhook event')}`
}

/** `102572032` → `102.6 MB`: a size for a message. */
export function megabytes (bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`
}
