import type { Config } from '../config.js'
import { counted } from '../counted.js'
import { openStoreTransfer } from '../store/open-store.js'
import type { CopyTally, TableTally } from '../store/store-copy.js'
import { STORE_TABLES } from '../store/store-rows.js'
import { copyStore, type CopyProgress } from '../transfer/copy.js'
import type { DataInvocation } from './data-command-line.js'
import { unlessInterrupted } from './interruptions.js'
import { ProgressLine } from './progress-line.js'

/** Conflicts listed one line each on stderr; the rest are counted. */
const LISTED_CONFLICTS = 20
/** A copy's statements may take longer than a request's (a count of a large table): at least this long. */
const MIN_QUERY_TIMEOUT_MS = 60_000

/**
 * `plantstore copy --from URL --to URL [--merge]`: the whole store into another (src/transfer/copy.ts).
 * One summary line on stdout; conflicts, errors and (on a terminal) progress on stderr. Exit 1 when it
 * failed, or when rows were kept as the target has them. Interrupted, it says how to finish the copy.
 */
export async function runCopy (invocation: Extract<DataInvocation, { command: 'copy' }>, config: Config): Promise<number> {
  const fromStore = await openStoreTransfer(invocation.from)
  const toStore = await openStoreTransfer(invocation.to)
  const from = fromStore.location
  const to = toStore.location
  const secrets = [...from.secrets, ...to.secrets]
  const progress = new ProgressLine('copied')
  let conflicts = 0
  const started = performance.now()
  try {
    // The batch under way when a signal comes is rolled back by the database (its transaction never
    // commits); every batch before it is committed with the marker, so the same command goes on.
    const result = await unlessInterrupted(() => { progress.finish() }, () => copyStore({
      from: fromStore,
      to: toStore,
      merge: invocation.merge,
      connection: { connectTimeoutMs: config.database.connectTimeoutMs, queryTimeoutMs: Math.max(config.database.statementTimeoutMs, MIN_QUERY_TIMEOUT_MS) },
      countPlants: process.stderr.isTTY,
      onProgress: (state) => { showProgress(progress, state) },
      onConflict: (message) => {
        if (++conflicts > LISTED_CONFLICTS) return
        progress.finish()
        process.stderr.write(`plantstore: ${message}\n`)
      }
    }), 'the rows copied so far are kept: run the same command again to finish the copy')
    progress.finish()
    if (conflicts > LISTED_CONFLICTS) process.stderr.write(`plantstore: … and ${conflicts - LISTED_CONFLICTS} more rows kept as the target has them, not listed\n`)
    const seconds = (performance.now() - started) / 1000
    const rate = result.plantsThisRun > 0 ? ` (${Math.round(result.plantsThisRun / seconds)} plants/s)` : ''
    const resumed = result.resumedFrom === undefined ? '' : `; this run finished the copy started ${new Date(result.resumedFrom).toISOString()}`
    process.stdout.write(`copied ${from.shown} to ${to.shown} in ${seconds.toFixed(1)} s${rate}: ${summary(result.tally)}${resumed}\n`)
    return Object.values(result.tally).some((tally) => tally.conflicts > 0) ? 1 : 0
  } catch (error) {
    progress.finish()
    throw new Error(withoutSecrets(error instanceof Error ? error.message : String(error), secrets), { cause: error })
  }
}

/** Plants with their rate and, when counted, the time left; the other tables' rows as a count. */
function showProgress (progress: ProgressLine, { table, rows, plants, plantsTotal }: CopyProgress): void {
  if (table.name === 'plants') progress.update(plants, plantsTotal === undefined ? undefined : plants / plantsTotal)
  else progress.show(() => `copying ${table.noun[1]}: ${rows}`)
}

/** `2 access tokens, …, 10 plants, …` copied, then what was skipped and what was kept as the target has it. */
function summary (tally: CopyTally): string {
  const counts = (field: keyof TableTally, all: boolean) => STORE_TABLES
    .filter((table) => all || (tally[table.name]?.[field] ?? 0) > 0)
    .map((table) => counted(tally[table.name]?.[field] ?? 0, ...table.noun))
    .join(', ')
  const skipped = counts('skipped', false)
  const conflicts = counts('conflicts', false)
  return counts('added', true) +
    (skipped === '' ? '' : `; already in the target as they are, skipped: ${skipped}`) +
    (conflicts === '' ? '' : `; kept as the target has them (each listed on stderr when found): ${conflicts}`)
}

function withoutSecrets (message: string, secrets: readonly string[]): string {
  return secrets.reduce((text, secret) => text.split(secret).join('***'), message)
}
