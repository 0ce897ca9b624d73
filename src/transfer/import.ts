import { plantJson } from '../store/plant-document.js'
import { COMMAND_LINE_WRITER } from '../store/change-log.js'
import type { PlantRecord, PlantStore } from '../store/plant-store.js'
import type { NdjsonLine } from './ndjson-lines.js'
import { parsePlantLine } from './plant-line.js'

export const CONFLICT_POLICIES = ['report', 'replace', 'fail'] as const
/** What an import does with a line whose id is stored as another plant. */
export type ConflictPolicy = typeof CONFLICT_POLICIES[number]

/** Writes an import keeps in flight: enough to fill the group-commit batches; a 1M-line import ran faster with 500 than with 2000 (and 250), in less memory. */
export const IMPORT_WINDOW = 500

export interface ImportCounts {
  /** Lines read that were not blank. */
  lines: number
  created: number
  unchanged: number
  replaced: number
  conflicts: number
  rejected: number
}

/** A line that was not taken, with why, for the report. */
export interface ImportProblem {
  readonly line: number
  readonly kind: 'conflict' | 'rejected'
  readonly message: string
}

export interface ImportOptions {
  readonly onConflict: ConflictPolicy
  readonly onProblem: (problem: ImportProblem) => void
  /** Called as lines are settled, with the counts so far. */
  readonly onProgress?: (counts: Readonly<ImportCounts>) => void
  readonly window?: number
}

export interface ImportResult {
  readonly counts: Readonly<ImportCounts>
  /** The line `--on-conflict=fail` stopped at; no line from it on was written. */
  readonly stoppedAtLine?: number
}

type LineOutcome = 'created' | 'unchanged' | 'replaced' | { readonly conflict: string } | { readonly rejected: string }

/**
 * Creates the plants of NDJSON lines through the store's own batched writes, `window` at a time; the
 * writes of one id wait for each other, so a file that names an id twice is applied in its order. A
 * stored plant that is the line's plant leaves it unchanged; one with another name or tag is a conflict,
 * left, replaced or stopped at as `onConflict` says. A line that is not a plant is rejected whole.
 * Rejects with the store's error (StoreUnavailableError) if a write fails: what was written stays.
 */
export async function importPlants (lines: AsyncIterable<NdjsonLine>, store: PlantStore, options: ImportOptions): Promise<ImportResult> {
  const counts: ImportCounts = { lines: 0, created: 0, unchanged: 0, replaced: 0, conflicts: 0, rejected: 0 }
  const window = options.window ?? IMPORT_WINDOW
  const inFlight: Array<{ readonly line: number, readonly outcome: Promise<LineOutcome> }> = []
  const lastWriteOfId = new Map<bigint, Promise<unknown>>()
  /** Under `fail`, a conflict no read foresaw (another client wrote the id meanwhile): nothing more is sent. */
  let unforeseenConflictLine: number | undefined

  const settleOldest = async (): Promise<void> => {
    const oldest = inFlight.shift()
    if (oldest === undefined) return
    const outcome = await oldest.outcome
    if (typeof outcome === 'string') {
      counts[outcome]++
    } else if ('rejected' in outcome) {
      counts.rejected++
      options.onProblem({ line: oldest.line, kind: 'rejected', message: outcome.rejected })
    } else {
      counts.conflicts++
      options.onProblem({ line: oldest.line, kind: 'conflict', message: outcome.conflict })
      if (options.onConflict === 'fail') unforeseenConflictLine ??= oldest.line
    }
    options.onProgress?.(counts)
  }

  const settleAll = async (): Promise<void> => {
    while (inFlight.length > 0) await settleOldest()
  }

  const write = (line: number, plant: PlantRecord): void => {
    const previous = lastWriteOfId.get(plant.id)
    const outcome = (previous === undefined ? writePlant(store, plant, options.onConflict) : previous.then(() => writePlant(store, plant, options.onConflict)))
    const settled = outcome.finally(() => { if (lastWriteOfId.get(plant.id) === settled) lastWriteOfId.delete(plant.id) })
    // Only the window's own promise reports a failure; this one merely orders the writes of one id.
    settled.catch(() => {})
    lastWriteOfId.set(plant.id, settled)
    inFlight.push({ line, outcome })
  }

  try {
    let batch: BatchLine[] = []
    /** Sends the batch's writes; under `fail`, only those before its first conflict, whose line it returns. */
    const flushBatch = async (): Promise<number | undefined> => {
      const lines = batch
      batch = []
      const stopAt = options.onConflict === 'fail' ? await firstConflict(store, lines) : undefined
      for (const entry of lines) {
        if ((stopAt !== undefined && entry.line >= stopAt.line) || unforeseenConflictLine !== undefined) break
        counts.lines++
        // A rejected line waits its turn in the window too, so every line is reported in the file's order.
        if ('problem' in entry) inFlight.push({ line: entry.line, outcome: Promise.resolve({ rejected: entry.problem }) })
        else write(entry.line, entry.plant)
        while (inFlight.length >= window) await settleOldest()
      }
      if (stopAt !== undefined || unforeseenConflictLine !== undefined) await settleAll()
      if (stopAt === undefined) return unforeseenConflictLine
      counts.lines++
      counts.conflicts++
      options.onProblem({ line: stopAt.line, kind: 'conflict', message: stopAt.message })
      return stopAt.line
    }

    for await (const line of lines) {
      batch.push({ line: line.number, ...('unreadable' in line ? { problem: line.unreadable } : parsePlantLine(line.text)) })
      if (batch.length >= window) {
        const stoppedAtLine = await flushBatch()
        if (stoppedAtLine !== undefined) return { counts, stoppedAtLine }
      }
    }
    const stoppedAtLine = await flushBatch()
    await settleAll()
    return stoppedAtLine === undefined ? { counts } : { counts, stoppedAtLine }
  } finally {
    // A write that failed leaves the others of the window to finish; none may outlive the import unawaited.
    await Promise.allSettled(inFlight.map((write) => write.outcome))
  }
}

type BatchLine = { readonly line: number } & ({ readonly plant: PlantRecord } | { readonly problem: string })

async function writePlant (store: PlantStore, plant: PlantRecord, onConflict: ConflictPolicy): Promise<LineOutcome> {
  const created = await store.create(plant, COMMAND_LINE_WRITER)
  if (created.status === 'created') return 'created'
  if (created.status === 'replayed') return 'unchanged'
  if (onConflict !== 'replace') return { conflict: conflictMessage(created.existing) }
  const replaced = await store.put(plant, { plant: created.existing }, COMMAND_LINE_WRITER)
  if (replaced.status === 'stale') return { conflict: `the plant with id ${plant.id} changed while it was being replaced; nothing changed` }
  return 'replaced'
}

function conflictMessage (existing: PlantRecord): string {
  return `the id ${existing.id} is stored with another name or tag: ${plantJson(existing.id, existing.name, existing.tag)}`
}

/**
 * For `--on-conflict=fail`: the first of `lines` (in order) whose id is stored, or named by an earlier
 * line of the batch, as another plant. Read before any of them is written, so none from it on is.
 */
async function firstConflict (store: PlantStore, lines: readonly BatchLine[]): Promise<{ readonly line: number, readonly message: string } | undefined> {
  const plants = lines.flatMap((entry) => 'plant' in entry ? [{ line: entry.line, plant: entry.plant }] : [])
  const stored = await Promise.all(plants.map(({ plant }) => store.get(plant.id)))
  /** What the store will hold for each id once the batch's earlier lines are written. */
  const holds = new Map<bigint, string | undefined>()
  for (const [index, { line, plant }] of plants.entries()) {
    const document = plantJson(plant.id, plant.name, plant.tag)
    const current = holds.has(plant.id) ? holds.get(plant.id) : stored[index]
    if (current !== undefined && current !== document) {
      const where = holds.has(plant.id) && stored[index] !== current ? 'is given by an earlier line' : 'is stored'
      return { line, message: `the id ${plant.id} ${where} with another name or tag: ${current}` }
    }
    holds.set(plant.id, document)
  }
  return undefined
}
