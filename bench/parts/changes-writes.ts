import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { median, record, roundRatios, summarize, type Samples, type Summary } from '../figures.js'
import { PAIRED_ROUNDS, type Harness } from '../harness.js'
import { ROOT, TOKEN, type Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'
import { fixed } from './changes-helpers.js'

/**
 * The changes part's first phase: what the change log costs a `POST /plants`. On SQLite and PostgreSQL,
 * one service per build on a store of its own, all started at once: the releases named (1.7.0, the
 * goal's reference; 1.8.0, main before the change log, so that the log's own share shows apart from
 * 1.8's finding indexes), this build, and this build with one webhook subscription whose events it
 * records but does not deliver (WEBHOOK_DELIVERY=false: an outbox row beside the change row, the
 * question of issue 37's item 5). Interleaved rounds of POST of new plants (the order reversed every
 * other round), each measurement once the one before has settled; ratios are medians of each round's
 * own ratio of server CPU per POST (the database's too, for PostgreSQL, in a column of their own).
 */

export const ENGINES = ['sqlite', 'postgres'] as const
export type Engine = typeof ENGINES[number]

/** A build to measure: its label (a release's version, or `now`) and its root, whose dist/server.js runs. */
export interface Build {
  readonly label: string
  readonly root: string
}

export const NOW = 'now'
const WEBHOOK = 'now-webhook'
/** The goal: a POST with the change log at most 1.10× 1.7.0's server CPU. */
export const POST_GOAL = 1.10
export const GOAL_RELEASE = '1.7.0'
const ADMIN_TOKEN = `bench-admin-${randomBytes(16).toString('hex')}`
const TOKENS = `${TOKEN},name=bench-admin;scopes=admin;${ADMIN_TOKEN}`
const WARM_UP_SECONDS = 1

export interface WriteRow extends Summary {
  readonly engine: Engine
  readonly target: string
  readonly build: string
}

export interface WriteComparison {
  readonly engine: Engine
  /** `a ÷ b`: a's server CPU per POST ÷ b's. */
  readonly what: string
  readonly ratio: number
  readonly range: string
  /** The same with the database's CPU added to each side (PostgreSQL). */
  readonly withDatabase?: number
  readonly goal?: number
  readonly met?: boolean
}

export async function measureWrites (harness: Harness, releases: readonly Build[]): Promise<{ rows: WriteRow[], comparisons: WriteComparison[] }> {
  const labels = [...releases.map((release) => release.label), NOW, WEBHOOK]
  const targets = new Map<string, Target>()
  try {
    for (const engine of ENGINES) {
      for (const label of labels) {
        const name = `${engine}-${label}`
        const root = releases.find((release) => release.label === label)?.root ?? ROOT
        const databaseUrl = engine === 'sqlite' ? `sqlite:${join(harness.workFolder, `writes-${label}.db`)}` : await harness.postgresDatabase()
        const webhook = label === WEBHOOK ? { WEBHOOK_DELIVERY: 'false', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } : {}
        const target = await harness.servers.startService(name, databaseUrl, { PLANTSTORE_TOKENS: TOKENS, ...webhook }, root)
        if (label === WEBHOOK) await subscribe(target)
        targets.set(name, target)
      }
    }
    const plan = [...targets.values()]
    for (const target of plan) {
      await harness.measure(target, 'post', WARM_UP_SECONDS)
      await harness.settle(target, 5000)
    }
    const samples: Samples = new Map()
    const rounds = harness.roundsOf(PAIRED_ROUNDS)
    for (let round = 1; round <= rounds; round++) {
      for (const target of round % 2 === 1 ? plan : [...plan].reverse()) {
        const sample = await harness.measure(target, 'post', harness.durationSeconds)
        await harness.settle(target, 5000)
        record(samples, target.name, sample)
        harness.logSample(round, `${target.name}/post`, sample)
      }
    }
    const rows = ENGINES.flatMap((engine) => labels.map((label): WriteRow => ({
      engine,
      target: `${engine}-${label}`,
      build: label,
      ...summarize(samples.get(`${engine}-${label}`) ?? [], 1)
    })))
    const pairs: Array<[string, string]> = [
      ...releases.map((release): [string, string] => [NOW, release.label]),
      ...releases.slice(1).map((release): [string, string] => [release.label, releases[0]?.label as string]),
      [WEBHOOK, NOW]
    ]
    const comparisons = ENGINES.flatMap((engine) => pairs.map(([a, b]): WriteComparison => {
      const ratios = roundRatios(samples, `${engine}-${a}`, `${engine}-${b}`, 'serverCpuUs')
      const withDatabase = engine === 'postgres' ? withDatabaseRatios(samples, `${engine}-${a}`, `${engine}-${b}`) : undefined
      const ratio = fixed(median(ratios), 3)
      const goal = a === NOW && b === GOAL_RELEASE ? { goal: POST_GOAL, met: ratio <= POST_GOAL } : {}
      return { engine, what: `${a} ÷ ${b}`, ratio, range: ratioRange(ratios), ...(withDatabase === undefined ? {} : { withDatabase: fixed(median(withDatabase), 3) }), ...goal }
    }))
    printWrites(harness, rows, comparisons, rounds)
    return { rows, comparisons }
  } finally {
    for (const target of targets.values()) await harness.servers.stop(target)
  }
}

/** Per round: (a's server + database CPU) ÷ (b's). */
function withDatabaseRatios (samples: Samples, a: string, b: string): number[] {
  const reference = samples.get(b) ?? []
  return (samples.get(a) ?? []).map((sample, round) =>
    (sample.serverCpuUs + sample.databaseCpuUs) / ((reference[round]?.serverCpuUs ?? NaN) + (reference[round]?.databaseCpuUs ?? NaN)))
}

/** One subscription to every creation, at an address nothing listens on: WEBHOOK_DELIVERY=false never sends to it. */
async function subscribe (target: Target): Promise<void> {
  const response = await fetch(`${target.url}/admin/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: 'http://127.0.0.1:9/hooks', events: ['plant.created', 'plant.updated', 'plant.deleted'] })
  })
  if (response.status !== 201) throw new Error(`${target.name}: POST /admin/webhooks answered ${response.status}: ${await response.text()}`)
}

function printWrites (harness: Harness, rows: readonly WriteRow[], comparisons: readonly WriteComparison[], rounds: number): void {
  process.stdout.write(`\nPOST /plants of new plants, each build on a store of its own, 50 connections; medians of ${describeRounds(rounds, harness.durationSeconds)}, interleaved\n`)
  process.stdout.write(`${formatTable(['target', 'req/s', 'p99 ms', 'server µs/POST', 'db µs/POST', 'errors', `${harness.generator.name} CPU`],
    rows.map((row) => [row.target, String(row.rps), String(row.p99), row.serverCpuUs.toFixed(1), row.engine === 'postgres' ? String(row.databaseCpuUs) : '',
      String(row.errors), generatorCell(row.generatorCpuShare, row.valid)]), 1)}\n`)
  process.stdout.write('\nserver CPU per POST, a ÷ b: the median of the rounds\' own ratios\n')
  process.stdout.write(`${formatTable(['engine', 'a ÷ b', 'ratio', 'rounds', 'with db', 'goal'],
    comparisons.map((row) => [row.engine, row.what, row.ratio.toFixed(3), row.range, row.withDatabase?.toFixed(3) ?? '',
      row.goal === undefined ? '' : `≤ ${row.goal.toFixed(2)} ${row.met === true ? 'met' : 'MISSED'}`]), 2)}\n`)
}
