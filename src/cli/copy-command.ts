import type { Config } from '../config.js'
import { counted } from '../counted.js'
import type { CopyTally, TableTally } from '../store/store-copy.js'
import { STORE_TABLES } from '../store/store-rows.js'
import { copyStore, type CopyProgress } from '../transfer/copy.js'
import { locateStore } from '../transfer/store-location.js'
import type { DataInvocation } from './data-command-line.js'

/** Conflicts listed one line each on stderr; the rest are counted. */
const LISTED_CONFLICTS = 20
/** A copy's statements may take longer than a request's (a count of a large table): at least this long. */
const MIN_QUERY_TIMEOUT_MS = 60_000
const PROGRESS_EVERY_MS = 250
const SIGNALS = { SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const

/**
 * `plantstore copy --from URL --to URL [--merge]`: the whole store into another (src/transfer/copy.ts).
 * One summary line on stdout; conflicts, errors and (on a terminal) progress on stderr. Exit 1 when it
 * failed, or when rows were kept as the target has them. Interrupted, it says how to finish the copy.
 */
export async function runCopy (invocation: Extract<DataInvocation, { command: 'copy' }>, config: Config): Promise<number> {
  const from = locateStore(invocation.from)
  const to = locateStore(invocation.to)
  const secrets = [...from.secrets, ...to.secrets]
  const progress = process.stderr.isTTY ? new ProgressLine() : undefined
  let conflicts = 0
  const removeHandlers = exitOnSignals(() => progress?.end())
  const started = performance.now()
  try {
    const result = await copyStore({
      from,
      to,
      merge: invocation.merge,
      postgres: { connectTimeoutMs: config.database.connectTimeoutMs, queryTimeoutMs: Math.max(config.database.statementTimeoutMs, MIN_QUERY_TIMEOUT_MS) },
      countPlants: progress !== undefined,
      onProgress: (state) => progress?.show(state),
      onConflict: (message) => {
        if (++conflicts > LISTED_CONFLICTS) return
        progress?.end()
        process.stderr.write(`plantstore: ${message}\n`)
      }
    })
    progress?.end()
    if (conflicts > LISTED_CONFLICTS) process.stderr.write(`plantstore: … and ${conflicts - LISTED_CONFLICTS} more rows kept as the target has them, not listed\n`)
    const seconds = (performance.now() - started) / 1000
    const rate = result.plantsThisRun > 0 ? ` (${Math.round(result.plantsThisRun / seconds)} plants/s)` : ''
    const resumed = result.resumedFrom === undefined ? '' : `; this run finished the copy started ${new Date(result.resumedFrom).toISOString()}`
    process.stdout.write(`copied ${from.shown} to ${to.shown} in ${seconds.toFixed(1)} s${rate}: ${summary(result.tally)}${resumed}\n`)
    return Object.values(result.tally).some((tally) => tally.conflicts > 0) ? 1 : 0
  } catch (error) {
    progress?.end()
    throw new Error(withoutSecrets(error instanceof Error ? error.message : String(error), secrets), { cause: error })
  } finally {
    removeHandlers()
  }
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

/**
 * An interrupted copy exits at once: the batch under way is rolled back by the database (its transaction
 * never commits), and every batch before it is committed with the marker, so the same command goes on.
 */
function exitOnSignals (before: () => void): () => void {
  const removers = Object.entries(SIGNALS).map(([signal, number]) => {
    const handler = (): void => {
      before()
      process.stderr.write(`plantstore: interrupted by ${signal}; the rows copied so far are kept: run the same command again to finish the copy\n`)
      process.exit(128 + number)
    }
    process.once(signal, handler)
    return () => process.off(signal, handler)
  })
  return () => { for (const remove of removers) remove() }
}

/** One line on a terminal's stderr, rewritten at most four times a second. */
class ProgressLine {
  private shownAt = 0
  private shown = false
  private readonly started = performance.now()

  show ({ table, rows, plants, plantsTotal }: CopyProgress): void {
    const now = performance.now()
    if (now - this.shownAt < PROGRESS_EVERY_MS) return
    this.shownAt = now
    const rate = Math.round(plants / ((now - this.started) / 1000))
    const text = table.name === 'plants'
      ? `copying plants: ${plants}${plantsTotal === undefined ? '' : ` of ${plantsTotal}`} (${rate}/s` +
        `${plantsTotal === undefined || rate === 0 ? '' : `, ${Math.ceil(Math.max(0, plantsTotal - plants) / rate)} s left`})`
      : `copying ${table.noun[1]}: ${rows}`
    process.stderr.write(`\r${text}\x1b[K`)
    this.shown = true
  }

  end (): void {
    if (this.shown) process.stderr.write('\r\x1b[K')
    this.shown = false
  }
}
