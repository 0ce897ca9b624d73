import type { Config } from '../config.js'
import { counted } from '../counted.js'
import { isPostgresUrl, openStoreTransfer } from '../store/open-store.js'
import type { CopyTally, TableTally } from '../store/store-copy.js'
import { STORE_TABLES } from '../store/store-rows.js'
import { copyStore, type CopyProgress } from '../transfer/copy.js'
import { defineCommand } from './command.js'
import { unlessInterrupted } from './interruptions.js'
import { ProgressLine } from './progress-line.js'
import { DATA_EXIT_CODES } from './usage.js'

export const COPY_USAGE = `Usage: plantstore copy --from URL --to URL [--merge]

Copies a whole store into another, SQLite or PostgreSQL either way: plants (their exact ids), access
tokens (live, expired and revoked; their digests, never the tokens), webhook subscriptions (their
signing secrets as stored, still sealed under WEBHOOK_SECRETS_KEY: start the target's service with the
same key), pending webhook events (unleased, so the target delivers them at once), delivery attempts,
and the change log: each change with its seq, and the head, so the target numbers its next change after
the source's last and clients resume their feed there with the same after=SEQ.

The source is read in one snapshot and never changed. Stop its service first, or stop writing to it:
a write made while the copy runs is not in the copy. No service may use a SQLite target meanwhile.

A target that holds data (a plant, a token, a webhook subscription or a numbered change; the
"initial-admin" token that a service's first start made counts) is refused and left as it is, unless
--merge is given; a merge adds only the changes above the target's head. The copy is
committed in batches, each with a record of where it stands: interrupted (Ctrl-C, kill -9, the target
database stopping), the same command run again finishes it. On success, one line on stdout says what
was copied, how long it took and, for a copy of a second or more, how fast; on a terminal, stderr
shows the progress. A URL's password may be left out and given in PGPASSWORD; no message shows it.

Options:
  --from URL     the store to copy: sqlite:PATH (an existing file) or postgres://...
  --to URL       the store to copy into: sqlite:PATH (made if need be) or postgres://...
  --merge        copy into a target that holds data: rows it lacks are added, rows it holds as they are
                 are skipped, and rows it holds otherwise are kept as it has them and listed on stderr
                 (exit 1), as is a live token whose name a live token of the target has
  -h, --help     show this help

${DATA_EXIT_CODES}`

interface CopyInvocation { readonly command: 'copy', readonly from: string, readonly to: string, readonly merge: boolean }

/** Conflicts listed one line each on stderr; the rest are counted. */
const LISTED_CONFLICTS = 20
/** A copy's statements may take longer than a request's (a count of a large table): at least this long. */
const MIN_QUERY_TIMEOUT_MS = 60_000

/**
 * `plantstore copy --from URL --to URL [--merge]`: the whole store into another (src/transfer/copy.ts).
 * One summary line on stdout; conflicts, errors and (on a terminal) progress on stderr. Exit 1 when it
 * failed, or when rows were kept as the target has them. Interrupted, it says how to finish the copy.
 */
export const copy = defineCommand<CopyInvocation>({
  name: 'copy',
  summary: 'copy a whole store between SQLite and PostgreSQL',
  usage: COPY_USAGE,
  parse ({ options }) {
    const parsed = options({ from: { type: 'string' }, to: { type: 'string' }, merge: { type: 'boolean' } }, false)
    if (parsed.command === 'help') return parsed
    const { fail, text } = parsed
    const from = text('from')
    const to = text('to')
    if (from === undefined) throw fail('copy needs --from URL, the store to copy')
    if (to === undefined) throw fail('copy needs --to URL, the store to copy into')
    for (const [option, url] of [['--from', from], ['--to', to]] as const) {
      if (url === 'memory:') throw fail(`${option} is "memory:": a memory store lives only inside its service; copy a sqlite: or postgres:// store`)
      if (!url.startsWith('sqlite:') && !isPostgresUrl(url)) {
        throw fail(`${option} must be a sqlite: or postgres:// URL, got one starting ${JSON.stringify(url.split(':')[0])}`)
      }
    }
    if (from === to) throw fail('--from and --to name the same store')
    return { command: 'copy', from, to, merge: parsed.values.merge === true }
  },
  run: copyBetweenStores
})

async function copyBetweenStores (invocation: CopyInvocation, config: Config): Promise<number> {
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
    const took = timeAndRate(performance.now() - started, result.plantsThisRun)
    const resumed = result.resumedFrom === undefined ? '' : `; this run finished the copy started ${new Date(result.resumedFrom).toISOString()}`
    process.stdout.write(`copied ${from.shown} to ${to.shown} in ${took}: ${summary(result.tally)}${resumed}\n`)
    return Object.values(result.tally).some((tally) => tally.conflicts > 0) ? 1 : 0
  } catch (error) {
    progress.finish()
    throw new Error(withoutSecrets(error instanceof Error ? error.message : String(error), secrets), { cause: error })
  }
}

/**
 * `340 ms`, or `5.9 s (169492 plants/s)`: how long a copy took, and its rate where the time is long
 * enough for one to mean something (a copy of a few plants takes the time of its connections).
 */
export function timeAndRate (ms: number, plants: number): string {
  const milliseconds = Math.round(ms)
  if (milliseconds < 1000) return `${Math.max(1, milliseconds)} ms`
  const seconds = ms / 1000
  return `${seconds.toFixed(1)} s${plants > 0 ? ` (${Math.round(plants / seconds)} plants/s)` : ''}`
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
