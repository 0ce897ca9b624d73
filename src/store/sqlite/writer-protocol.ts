/**
 * The messages between the SQLite adapter (writer.ts, on the main thread) and its writer thread
 * (writer-thread.ts). They cross by structured clone, so ids stay `bigint`.
 */
import { plantRecord, type PlantRecord, type PlantRow } from '../plant-store.js'
import type { ChangeOperation, ChangeOutcome, CreateOperation, PlanOperation, PlanOutcome, WritePlan } from '../write-operations.js'
import type { ClaimedDelivery, ClaimRequest, NewWebhookSubscriptionRecord, OutboxRow, SettledAttempt, StoredSecretReplacement } from '../webhook-store.js'

/** What the writer thread is started with: its `workerData`. */
export interface WriterThreadData {
  readonly file: string
  readonly busyTimeoutMs: number
}

/**
 * What the writer thread reports for one write: a create stored, or the row it met (whether that is a
 * replay or a conflict is told on the main thread); for a change, its outcome by `decideChange`.
 */
export type WriteEffect =
  | { readonly inserted: true }
  | { readonly inserted: false, readonly existing: PlantRow | undefined }
  | { readonly outcome: ChangeOutcome }
  | { readonly planned: PlanOutcome }

/** The part of a claimed delivery the writer needs to record an attempt; its body, URL and secret stay behind. */
export type SettledDelivery = Pick<ClaimedDelivery, 'id' | 'subscriptionId' | 'eventId' | 'type' | 'attempts'>

export interface SettledAttemptRecord extends Omit<SettledAttempt, 'delivery'> {
  readonly delivery: SettledDelivery
}

export interface Settlement {
  readonly owner: string
  readonly attempts: readonly SettledAttemptRecord[]
}

/** The webhook dispatcher's bookkeeping the writer thread runs, each command in its own transaction. */
export interface WebhookArguments {
  createSubscription: NewWebhookSubscriptionRecord
  /** The subscription's id. */
  deleteSubscription: string
  claim: Omit<ClaimRequest, 'settled'> & { readonly settled?: readonly SettledAttemptRecord[] }
  settle: Settlement
  /** Attempts recorded before this time are deleted. */
  pruneAttempts: number
  rotateSecret: { readonly id: string, readonly storedSecret: string, readonly previousSecretUntil: number | undefined }
  replaceStoredSecrets: readonly StoredSecretReplacement[]
}

export interface WebhookResults {
  createSubscription: void
  /** Whether there was such a subscription. */
  deleteSubscription: boolean
  claim: OutboxRow[]
  settle: void
  /** How many attempts were deleted. */
  pruneAttempts: number
  /** Whether there was such a subscription. */
  rotateSecret: boolean
  /** How many secrets were replaced. */
  replaceStoredSecrets: number
}

export type WebhookCommand = keyof WebhookArguments

export type WebhookCommands = {
  readonly [Command in WebhookCommand]: (argument: WebhookArguments[Command]) => WebhookResults[Command]
}

export type WebhookRequest<Command extends WebhookCommand = WebhookCommand> = {
  [Name in Command]: { readonly command: Name, readonly argument: WebhookArguments[Name] }
}[Command]

/** One batch of plant writes, committed in one transaction. */
export interface WriteRequest {
  readonly operations: readonly ThreadWriteOperation[]
}

/** A write as it crosses to the thread: a plan packed by `packPlan` when it can be. */
export type ThreadWriteOperation = CreateOperation | ChangeOperation | PlanOperation | PackedPlanOperation
export interface PackedPlanOperation { readonly kind: 'packed-plan', readonly packed: string, readonly by: string }

/** A plan as the writer thread applies it: the plants expected, and each change's id and plant after it. */
export interface ThreadPlan {
  readonly expected: ReadonlyMap<bigint, PlantRecord | undefined>
  readonly changes: ReadonlyArray<{ readonly id: bigint, readonly after: PlantRecord | undefined }>
}

/**
 * A batch of creates only, the common batch under load, packed by `packCreates` into one text: a text
 * crosses to the thread as one copy, where an object per plant costs a structured clone each way.
 */
export interface CreatesRequest {
  readonly creates: string
}

/**
 * What the writer thread reports for a `CreatesRequest`: per create, in order, `1` when it stored its
 * plant and `0` when it met a row; `met` holds the rows met (undefined: none was there), in order.
 */
export interface CreateEffects {
  readonly inserted: string
  readonly met: ReadonlyArray<PlantRow | undefined>
}

/** A create as the writer thread runs it: the plant, and who it is recorded as made by. */
export interface ThreadCreate { readonly plant: PlantRecord, readonly by: string }

/**
 * The fields of the creates, each plant's id, name and tag (`-` for none, `+` and the tag for one) and
 * who made it, separated by U+0000; undefined when a name, tag or writer's name holds U+0000 itself (the
 * field rules refuse it, so the HTTP API never sends one), for the general `WriteRequest`.
 */
export function packCreates (creates: readonly ThreadCreate[]): string | undefined {
  let packed = ''
  for (const { plant: { id, name, tag }, by } of creates) {
    if (name.includes('\0') || tag?.includes('\0') === true || by.includes('\0')) return undefined
    packed += `${packed === '' ? '' : '\0'}${id}\0${name}\0${tag === undefined ? '-' : `+${tag}`}\0${by}`
  }
  return packed
}

/** The creates `packCreates` packed. */
export function unpackCreates (packed: string): ThreadCreate[] {
  const fields = packed.split('\0')
  const creates: ThreadCreate[] = []
  for (let index = 0; index + 3 < fields.length; index += 4) {
    const tag = fields[index + 2] as string
    const plant = plantRecord(BigInt(fields[index] as string), fields[index + 1] as string, tag === '-' ? undefined : tag.slice(1))
    creates.push({ plant, by: fields[index + 3] as string })
  }
  return creates
}

/**
 * A plan in one text, as `packCreates` packs plants (a batch's thousand plants cross as one copy): the
 * number of expected plants, then each expected plant and each change's plant after it as an id, a
 * name and a tag field (`-`: no tag, `+` and the tag, `!`: no plant at all). Undefined when a name or
 * tag holds U+0000.
 */
export function packPlan (plan: WritePlan): string | undefined {
  const fields: string[] = [String(plan.expected.size)]
  const add = (id: bigint, plant: PlantRecord | undefined): boolean => {
    if (plant !== undefined && (plant.name.includes('\0') || plant.tag?.includes('\0') === true)) return false
    fields.push(String(id), plant?.name ?? '', plant === undefined ? '!' : plant.tag === undefined ? '-' : `+${plant.tag}`)
    return true
  }
  for (const [id, plant] of plan.expected) if (!add(id, plant)) return undefined
  for (const { id, after } of plan.changes) if (!add(id, after)) return undefined
  return fields.join('\0')
}

/** The plan `packPlan` packed. */
export function unpackPlan (packed: string): ThreadPlan {
  const fields = packed.split('\0')
  const plantAt = (index: number): [bigint, PlantRecord | undefined] => {
    const id = BigInt(fields[index] as string)
    const tag = fields[index + 2] as string
    return [id, tag === '!' ? undefined : plantRecord(id, fields[index + 1] as string, tag === '-' ? undefined : tag.slice(1))]
  }
  const expectedEnd = 1 + 3 * Number(fields[0])
  const expected = new Map<bigint, PlantRecord | undefined>()
  for (let index = 1; index < expectedEnd; index += 3) expected.set(...plantAt(index))
  const changes: Array<{ id: bigint, after: PlantRecord | undefined }> = []
  for (let index = expectedEnd; index + 2 < fields.length; index += 3) {
    const [id, after] = plantAt(index)
    changes.push({ id, after })
  }
  return { expected, changes }
}

/** Prunes one chunk of expired changes (writer-changes.ts); the thread answers how many it deleted. */
export interface PruneChangesRequest {
  readonly pruneChanges: { readonly before: number, readonly limit: number }
}

/** Moves the plants the writes noted into the search index (search-index.ts); the thread answers how many. */
export const INDEX_SEARCH = 'index search'

/** The last message: the writer closes its connection and its thread ends. */
export const CLOSE = 'close'

export type WriterMessage = WriteRequest | CreatesRequest | PruneChangesRequest | WebhookRequest | typeof INDEX_SEARCH | typeof CLOSE

/** The answer to each request, in the order of the requests (the thread handles one message at a time). */
export type WriterReply =
  | { readonly result: WriteEffect[] | CreateEffects | WebhookResults[WebhookCommand] | number }
  | { readonly error: { readonly code: string | undefined, readonly message: string } }
