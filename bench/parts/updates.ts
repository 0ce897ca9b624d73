import { join } from 'node:path'
import { median, record, roundRatios, summarize, type Row, type Samples } from '../figures.js'
import { PAIRED_ROUNDS, PRELOADED, type Harness, type Part } from '../harness.js'
import { LISTED_TAG, type Load } from '../load-generator.js'
import type { Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'

const UPDATES_TARGET = 'sqlite-updates'
/** Each load of the updates part and the load it is compared with. */
const UPDATE_LOADS: ReadonlyArray<readonly [Load, Load]> = [['post', 'post'], ['put', 'post'], ['patch', 'post'], ['list', 'list'], ['list-tag', 'list']]
/** The bound: PUT and PATCH within 10 % of POST, a page of one tag within 10 % of an unfiltered page. */
const UPDATE_TOLERANCE = 0.1
/** The order of a round: each load next to the one it is compared with. */
const UPDATE_ORDER: readonly Load[] = ['put', 'post', 'patch', 'list', 'list-tag']

/**
 * Do changes cost what creates cost, and a filtered page what a page costs? One SQLite service, its
 * 2000 preloaded plants a quarter each of four tags. POST creates new plants; PUT replaces and PATCH
 * renames the preloaded ones, in turn, so no two requests in flight name the same plant (group commit
 * would give them batches of their own); `list` is the first page of 100 plants, `list-tag` the first
 * page of the 100 plants with one tag, read through its index. Interleaved rounds, each load next to the
 * one it is compared with, the order reversed every other round; each ratio is the median of the
 * rounds' own ratios, which drift between rounds does not move.
 */
export async function compareUpdates (harness: Harness): Promise<Row[]> {
  const service = await harness.servers.startService(UPDATES_TARGET, `sqlite:${join(harness.workFolder, 'updates.db')}`)
  await harness.preload(service, PRELOADED)
  await checkFullPages(service)
  for (const [load] of UPDATE_LOADS) await harness.measure(service, load, 1)

  const samples: Samples = new Map()
  for (let round = 1; round <= harness.roundsOf(PAIRED_ROUNDS); round++) {
    const loads = [...UPDATE_ORDER]
    for (const load of round % 2 === 1 ? loads : loads.reverse()) {
      const sample = await harness.measure(service, load, harness.durationSeconds)
      const key = `${UPDATES_TARGET}/${load}`
      record(samples, key, sample)
      harness.logSample(round, key, sample)
    }
  }
  await harness.servers.stop(service)

  const pairedRatio = (load: Load, reference: Load, measure: 'rps' | 'serverCpuUs') =>
    median(roundRatios(samples, `${UPDATES_TARGET}/${load}`, `${UPDATES_TARGET}/${reference}`, measure))
  const rows = UPDATE_LOADS.map(([load, reference]) => ({
    target: UPDATES_TARGET,
    load,
    ...summarize(samples.get(`${UPDATES_TARGET}/${load}`) ?? [], 1),
    ratio: Number(pairedRatio(load, reference, 'rps').toFixed(3)),
    cpuRatio: Number(pairedRatio(load, reference, 'serverCpuUs').toFixed(3)),
    against: `${UPDATES_TARGET}/${reference}`
  }))
  printUpdatesTable(harness, rows, samples)
  return rows
}

/** That the two list loads read what the rows say: a page of 100 plants each, the filtered one all of one tag. */
async function checkFullPages (target: Target): Promise<void> {
  for (const path of ['/plants?limit=100', `/plants?limit=100&tag=${LISTED_TAG}`]) {
    const response = await fetch(`${target.url}${path}`, { headers: { authorization: `Bearer ${target.token}` } })
    const page = await response.json() as Array<{ tag?: string }>
    if (response.status !== 200 || page.length !== 100 || (path.includes('tag=') && page.some((plant) => plant.tag !== LISTED_TAG))) {
      throw new Error(`GET ${path} answered ${response.status} with ${page.length} plants, not a page of 100`)
    }
  }
}

export function printUpdatesTable (harness: Harness, rows: Row[], samples: Samples): void {
  const header = ['load', 'against', 'req/s', 'req/s ÷', 'µs/req', 'CPU ÷', 'per-round req/s ÷', 'p99 ms', 'errors', `${harness.generator.name} CPU`,
    `within ${UPDATE_TOLERANCE * 100} %`]
  const lines = rows.map((row) => {
    const reference = row.against.slice(UPDATES_TARGET.length + 1)
    const within = row.ratio >= 1 - UPDATE_TOLERANCE
    return [row.load, reference, String(row.rps), row.ratio.toFixed(3), String(row.serverCpuUs), row.cpuRatio.toFixed(3),
      ratioRange(roundRatios(samples, `${UPDATES_TARGET}/${row.load}`, row.against, 'rps')), String(row.p99), String(row.errors),
      generatorCell(row.generatorCpuShare, row.valid), row.load === reference ? '' : within ? 'yes' : 'no']
  })
  process.stdout.write(`\nSQLite, one service: changes ÷ creates, a page of one tag ÷ a page of all; medians of ${describeRounds(harness.roundsOf(PAIRED_ROUNDS), harness.durationSeconds)}, ` +
    `ratios the medians of each round's ratio\n${formatTable(header, lines, 2)}\n`)
}

export const updatesPart: Part = {
  name: 'updates',
  owns: (row) => row.against?.startsWith(`${UPDATES_TARGET}/`) === true,
  compare: compareUpdates
}
