import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import type { JwtSettings } from '../../src/auth/jwt/jwt-settings.js'
import { median, type Row } from '../figures.js'
import type { Harness } from '../harness.js'
import { AUDIENCE, KEY_OF, SIGNING_ALGORITHMS, type IdentityProvider, type SigningAlgorithm } from '../identity-provider.js'
import { rssMb } from '../processes.js'
import { formatTable } from '../report.js'

/** What a first verification's row is against: the same tokens presented again, found remembered. */
export const FIRST_VERIFICATION_REFERENCE = 'jwt-remembered'
const FIRST_LOAD = 'first-verification'
const REMEMBERED_LOAD = 'remembered'
/** Distinct tokens measured per algorithm over the whole run (a quick run's, and a full run's). */
const TOKENS_PER_ALGORITHM = { quick: 200, full: 2000 }
/** Verified unrecorded at the start of each algorithm's turn: its key's import, and the code's first runs. */
const WARM_UP_TOKENS = 20
/** Signing stops after this long per algorithm (RSA signs in a millisecond or more), with fewer tokens measured. */
const SIGNING_BUDGET_MS = { quick: 3000, full: 12_000 }

interface Batch {
  /** CPU time of the whole process (every thread: WebCrypto verifies on libuv's pool) ÷ tokens, in µs. */
  readonly cpuUs: number
  /** Each identify()'s wall time, awaited alone, in µs. */
  readonly wallUs: readonly number[]
}

/**
 * What verifying a JWT never seen before costs, per algorithm, against what the same token costs once
 * remembered: in the bench's own process (on the load generator's CPU, idle by then), with the service's
 * `JwtAccessTokens` (src/) and the keys of the bench's provider, found by discovery. Distinct tokens are
 * signed beforehand; each round builds a new JwtAccessTokens (nothing remembered), and for each algorithm,
 * in an order that turns with the round, verifies a few tokens unrecorded, then its share of the tokens
 * one at a time (awaiting each), then the same tokens again (each found remembered). CPU per token is
 * process.cpuUsage() across the batch ÷ its tokens; the figures are medians over rounds.
 */
export async function measureFirstVerifications (harness: Harness, provider: IdentityProvider): Promise<Row[]> {
  const rounds = harness.rounds
  const signed = await signTokens(harness, provider, rounds)
  const settings: JwtSettings = {
    issuer: provider.issuer,
    audiences: [AUDIENCE],
    jwksUrl: undefined,
    algorithms: [...SIGNING_ALGORITHMS],
    scopeClaim: 'scope',
    clockToleranceS: 30
  }
  const first = new Map<SigningAlgorithm, Batch[]>()
  const remembered = new Map<SigningAlgorithm, Batch[]>()
  for (let round = 1; round <= rounds; round++) {
    const accessTokens = new JwtAccessTokens(settings)
    let fetchFailure: string | undefined
    await accessTokens.start({ fetchFailed: (reason) => { fetchFailure = reason }, fetchRecovered: () => {} })
    try {
      if (fetchFailure !== undefined) throw new Error(`the bench's identity provider's keys could not be fetched: ${fetchFailure}`)
      for (let turn = 0; turn < SIGNING_ALGORITHMS.length; turn++) {
        const algorithm = SIGNING_ALGORITHMS[(round + turn) % SIGNING_ALGORITHMS.length] as SigningAlgorithm
        const tokens = signed.get(algorithm) ?? []
        const perRound = Math.floor(tokens.length / rounds)
        const share = tokens.slice((round - 1) * perRound, round * perRound)
        await identifyEach(accessTokens, share.slice(0, WARM_UP_TOKENS))
        const measured = share.slice(WARM_UP_TOKENS)
        const firstBatch = await identifyEach(accessTokens, measured)
        const rememberedBatch = await identifyEach(accessTokens, measured)
        first.set(algorithm, [...first.get(algorithm) ?? [], firstBatch])
        remembered.set(algorithm, [...remembered.get(algorithm) ?? [], rememberedBatch])
        process.stderr.write(`round ${round} jwt/${algorithm}: ${measured.length} tokens, ${firstBatch.cpuUs.toFixed(1)} µs CPU per first verification, ` +
          `${rememberedBatch.cpuUs.toFixed(1)} per remembered token\n`)
      }
    } finally {
      accessTokens.stop()
    }
  }

  const rows = SIGNING_ALGORITHMS.flatMap((algorithm) => {
    const firstSummary = summarizeBatches(first.get(algorithm) ?? [])
    const rememberedSummary = summarizeBatches(remembered.get(algorithm) ?? [])
    return [
      { target: `jwt-${algorithm}`, load: FIRST_LOAD, ...firstSummary, ratio: Number((firstSummary.rps / rememberedSummary.rps).toFixed(3)), cpuRatio: Number((firstSummary.serverCpuUs / rememberedSummary.serverCpuUs).toFixed(3)), against: FIRST_VERIFICATION_REFERENCE },
      { target: `jwt-${algorithm}`, load: REMEMBERED_LOAD, ...rememberedSummary, ratio: 1, cpuRatio: 1, against: FIRST_VERIFICATION_REFERENCE }
    ]
  })
  printFirstVerificationTable(rows, first, signed, rounds, (await harness.regime()).getCpuUs, harness.pinning)
  return rows
}

/** Per algorithm, distinct tokens for every round's warm-up and share, as many as the signing budget allows. */
async function signTokens (harness: Harness, provider: IdentityProvider, rounds: number): Promise<Map<SigningAlgorithm, string[]>> {
  const wanted = (harness.quick ? TOKENS_PER_ALGORITHM.quick : TOKENS_PER_ALGORITHM.full) + rounds * WARM_UP_TOKENS
  const budgetMs = harness.quick ? SIGNING_BUDGET_MS.quick : SIGNING_BUDGET_MS.full
  const signed = new Map<SigningAlgorithm, string[]>()
  for (const algorithm of SIGNING_ALGORITHMS) {
    const tokens: string[] = []
    const deadline = performance.now() + budgetMs
    while (tokens.length < wanted && performance.now() < deadline) tokens.push(await provider.sign(algorithm))
    if (tokens.length < rounds * (WARM_UP_TOKENS + 1)) throw new Error(`only ${tokens.length} ${algorithm} tokens were signed in ${budgetMs} ms`)
    signed.set(algorithm, tokens)
  }
  return signed
}

async function identifyEach (accessTokens: JwtAccessTokens, tokens: readonly string[]): Promise<Batch> {
  const wallUs: number[] = []
  let refusal: string | undefined
  const refused = (reason: string) => { refusal = reason }
  const cpuBefore = process.cpuUsage()
  for (const token of tokens) {
    const started = performance.now()
    const identity = await accessTokens.identify(token, refused)
    wallUs.push((performance.now() - started) * 1000)
    if (identity === undefined) throw new Error(`a token of the bench's identity provider was refused: ${refusal ?? 'no reason given'}`)
  }
  const cpu = process.cpuUsage(cpuBefore)
  return { cpuUs: (cpu.user + cpu.system) / tokens.length, wallUs }
}

/** A Row's figures for verifications: per second one at a time, wall-time percentiles in ms, µs of CPU each; medians over rounds. */
function summarizeBatches (batches: readonly Batch[]) {
  const percentile = (values: readonly number[], share: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * share))] ?? NaN
  const meanWallUs = median(batches.map((batch) => batch.wallUs.reduce((sum, wall) => sum + wall, 0) / batch.wallUs.length))
  return {
    rps: Math.round(1e6 / meanWallUs),
    p50: Number((median(batches.map((batch) => percentile(batch.wallUs, 0.5))) / 1000).toFixed(4)),
    p99: Number((median(batches.map((batch) => percentile(batch.wallUs, 0.99))) / 1000).toFixed(4)),
    rssMb: Math.round(rssMb(process.pid)),
    errors: 0,
    serverCpuUs: Number(median(batches.map((batch) => batch.cpuUs)).toFixed(1)),
    databaseCpuUs: 0,
    generatorCpuShare: 0,
    valid: true
  }
}

function printFirstVerificationTable (rows: Row[], first: ReadonlyMap<SigningAlgorithm, Batch[]>, signed: ReadonlyMap<SigningAlgorithm, string[]>,
  rounds: number, baselineGetCpuUs: number, pinned: boolean): void {
  const header = ['algorithm', 'key', 'chars', 'tokens', 'µs CPU first', 'per-round µs first', 'µs CPU remembered', 'first ÷ remembered',
    'first ÷ baseline GET', 'wall µs p50/p99 first', 'first/s one at a time']
  const lines = SIGNING_ALGORITHMS.map((algorithm) => {
    const firstRow = rows.find((row) => row.target === `jwt-${algorithm}` && row.load === FIRST_LOAD) as Row
    const rememberedRow = rows.find((row) => row.target === `jwt-${algorithm}` && row.load === REMEMBERED_LOAD) as Row
    const batches = first.get(algorithm) ?? []
    const cpuRange = `${Math.min(...batches.map((batch) => batch.cpuUs)).toFixed(1)}–${Math.max(...batches.map((batch) => batch.cpuUs)).toFixed(1)}`
    return [algorithm, KEY_OF[algorithm], String(signed.get(algorithm)?.[0]?.length ?? 0), String(batches.reduce((sum, batch) => sum + batch.wallUs.length, 0)),
      String(firstRow.serverCpuUs), cpuRange, String(rememberedRow.serverCpuUs), firstRow.cpuRatio.toFixed(1),
      (firstRow.serverCpuUs / baselineGetCpuUs).toFixed(1), `${Math.round(firstRow.p50 * 1000)}/${Math.round(firstRow.p99 * 1000)}`, String(firstRow.rps)]
  })
  process.stdout.write('\nFirst verification of a JWT never seen before, per algorithm, against the same token found remembered: JwtAccessTokens (src/) ' +
    `in the bench's process (${pinned ? "CPU 1, the load generator's, idle meanwhile" : 'not pinned'}), keys by discovery from the bench's provider, ` +
    'each token awaited alone; ' +
    `µs CPU: process.cpuUsage() (all threads) ÷ tokens, medians of ${rounds} round${rounds === 1 ? '' : 's'}; ` +
    `÷ baseline GET: the regime's CPU per GET by id\n${formatTable(header, lines, 2)}\n`)
}
