/**
 * Instruments for the change log's proofs (test/store/change-order.test.ts, test/faults/changes-crash.test.ts):
 * a reader that follows a feed with its own cursor and notes every break in its numbering, the whole log
 * read from its start, the log folded into the plants it describes, and the plants a store holds.
 */
import type { ChangeRecord } from '../../src/store/change-log.js'
import { plantJson } from '../../src/store/plant-document.js'
import type { PlantStore } from '../../src/store/plant-store.js'

/** What a reader needs of an entry of a feed: its number. */
export interface Numbered { readonly seq: bigint }

/** Up to `limit` entries with a greater `seq` than `after`, ascending. */
export type PageSource<Entry extends Numbered> = (after: bigint, limit: number) => Promise<readonly Entry[]>

/**
 * A client that follows a feed as a follower of `GET /plants/changes` does: it asks for the entries after
 * the last one it saw, keeps them, and moves its cursor to the last. The change log numbers its changes
 * without a gap, so every entry must carry the number right after the cursor; any other (a skip, a
 * repeat, a step back) is a break, noted in `breaks`, and the reader goes on from it, as a real client
 * would, never to see what it skipped.
 */
export class FeedReader<Entry extends Numbered> {
  after: bigint
  readonly seen: Entry[] = []
  readonly breaks: string[] = []
  polls = 0

  /** `source` may be replaced (another instance, a store reopened after a restart): the cursor stays. */
  constructor (public source: PageSource<Entry>, readonly limit: number, readonly name: string, from = 0n) {
    this.after = from
  }

  /** Reads one page; how many entries it held. */
  async poll (): Promise<number> {
    const page = await this.source(this.after, this.limit)
    this.polls++
    for (const entry of page) {
      if (entry.seq !== this.after + 1n) this.breaks.push(`${this.name}: after ${this.after} came ${entry.seq}`)
      this.after = entry.seq
      this.seen.push(entry)
    }
    return page.length
  }

  /** Polls until a page comes back short: everything committed before the last poll is seen. */
  async drain (): Promise<void> {
    while (await this.poll() === this.limit);
  }
}

/** The feed of a store, as a FeedReader reads it (`keptSince` 0: nothing is past the retention). */
export function storeFeed (store: PlantStore): PageSource<ChangeRecord> {
  return async (after, limit) => {
    const page = await store.changes.read({ after, limit, keptSince: 0 })
    if (page.status !== 'page') throw new Error(`the feed after ${after} is expired`)
    return page.changes
  }
}

/** The whole log from its start, pages of 1000, with the breaks in its numbering (none expected). */
export async function wholeLog (store: PlantStore): Promise<{ changes: ChangeRecord[], breaks: string[] }> {
  const reader = new FeedReader(storeFeed(store), 1000, 'whole log')
  await reader.drain()
  return { changes: reader.seen, breaks: reader.breaks }
}

/** A change as one line of text: its type and the plant after it as `GET /plants/{id}` shows it (`-` for a delete). */
export function changeText (change: ChangeRecord): string {
  return `${change.type} ${documentAfter(change) ?? '-'}`
}

/** The plant's document after the change; undefined for a delete. */
export function documentAfter (change: ChangeRecord): string | undefined {
  return change.plant === undefined ? undefined : plantJson(change.plant.id, change.plant.name, change.plant.tag)
}

/**
 * The changes applied in order to no plants: id → document. Each change must follow from the state
 * before it (a create of an absent plant, an update or a delete of a present one); `mismatches` says
 * where one does not.
 */
export function foldChanges (changes: readonly ChangeRecord[]): { plants: Map<string, string>, mismatches: string[] } {
  const plants = new Map<string, string>()
  const mismatches: string[] = []
  for (const change of changes) {
    const id = change.id.toString()
    const present = plants.has(id)
    if (present === (change.type === 'plant.created')) mismatches.push(`seq ${change.seq}: ${change.type} of plant ${id}, which was ${present ? 'present' : 'absent'}`)
    const document = documentAfter(change)
    if (document === undefined) plants.delete(id)
    else plants.set(id, document)
  }
  return { plants, mismatches }
}

/** Every plant the store holds, read a page of 1000 at a time in id order: id → document. */
export async function storedPlants (store: PlantStore): Promise<Map<string, string>> {
  const plants = new Map<string, string>()
  let after: bigint | undefined
  for (;;) {
    const page = await store.list({ limit: 1000, lines: true, ...(after === undefined ? {} : { after }) })
    for (const line of page.json.split('\n')) {
      if (line === '') continue
      const id = /^\{"id":(-?\d+),/.exec(line)?.[1]
      if (id === undefined) throw new Error(`a plant document without an id: ${line}`)
      plants.set(id, line)
    }
    if (page.nextAfter === undefined) return plants
    after = page.nextAfter
  }
}

/** Each id's changes as text (changeText), in the log's order. */
export function changesById (changes: readonly ChangeRecord[]): Map<string, string[]> {
  const byId = new Map<string, string[]>()
  for (const change of changes) {
    const id = change.id.toString()
    const texts = byId.get(id) ?? []
    texts.push(changeText(change))
    byId.set(id, texts)
  }
  return byId
}

/** The seqs 1, 2, … n. */
export function oneTo (n: number): bigint[] {
  return Array.from({ length: n }, (_, index) => BigInt(index + 1))
}
