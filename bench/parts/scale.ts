import { join } from 'node:path'
import pg from 'pg'
import { openPostgresStore } from '../../src/store/postgres/store.js'
import { openSqliteDatabase } from '../../src/store/sqlite/connection.js'
import { summarize, type Sample, type Summary } from '../figures.js'
import { LOADS, PRELOADED, type Harness } from '../harness.js'
import { LISTED_TAG, type Load } from '../load-generator.js'
import { asJson, formatTable, generatorCell, writeResultsFile } from '../report.js'

/**
 * `--scale`: the cost as the store grows. Bulk-loads N plants into SQLite and PostgreSQL, then measures
 * POST, GET by id, a deep list page and a deep page of one tag against the empty store; results go to
 * bench/results/scale.json.
 */

const SCALE_LOADS: readonly Load[] = [...LOADS, 'list-tag']

type ScaleRow = { backend: string, size: number, load: Load } & Summary

/** Bulk-loaded stores give LISTED_TAG to every `listedStep(size)`th plant: about 10,000 of them at any size. */
const listedStep = (size: number) => Math.max(1, Math.floor(size / 10_000))

/** A store of `size` plants loaded with SQL (not through the service), as a DATABASE_URL. */
export async function bulkLoad (harness: Harness, backend: 'sqlite' | 'postgres', size: number): Promise<string> {
  const step = listedStep(size)
  if (backend === 'sqlite') {
    const file = join(harness.workFolder, `scale-${size}.db`)
    const db = openSqliteDatabase(file)
    db.pragma('synchronous = OFF')
    const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
    const chunk = db.transaction((from: number, to: number) => {
      for (let id = from; id < to; id++) insert.run(BigInt(id), `plant ${id}`, id % step === 0 ? LISTED_TAG : 'tag-0')
    })
    for (let from = 1; from <= size; from += 100_000) chunk(from, Math.min(from + 100_000, size + 1))
    db.close()
    return `sqlite:${file}`
  }
  const url = await harness.postgresDatabase()
  // Opening the store once applies the migrations, as the service would.
  await (await openPostgresStore(url, { poolSize: 1, connectTimeoutMs: 5000, statementTimeoutMs: 600_000 })).close()
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query(`INSERT INTO plants (id, name, tag)
    SELECT g, 'plant ' || g, CASE WHEN g % $2 = 0 THEN $3 ELSE 'tag-0' END FROM generate_series(1, $1::bigint) AS g`, [size, step, LISTED_TAG])
  await client.query('VACUUM ANALYZE plants')
  await client.end()
  return url
}

export async function compareSizes (harness: Harness, sizes: number[]): Promise<void> {
  const rows: ScaleRow[] = []
  for (const backend of ['sqlite', 'postgres'] as const) {
    // Every size is loaded and started first, then measured in interleaved rounds, so that the
    // machine's drift weighs on each size alike.
    const targets = []
    for (const size of [0, ...sizes]) {
      const started = Date.now()
      const databaseUrl = await bulkLoad(harness, backend, size)
      process.stderr.write(`${backend}: loaded ${size} plants in ${Math.round((Date.now() - started) / 1000)} s\n`)
      const target = await harness.servers.startService(`${backend}-${size}`, databaseUrl)
      if (size === 0) await harness.preload(target, PRELOADED)
      else target.preloadedIds = Array.from({ length: 10_000 }, () => BigInt(1 + Math.floor(Math.random() * size)))
      const results = new Map<Load, Sample[]>(SCALE_LOADS.map((load) => [load, []]))
      // The empty store's preload is 2000 plants: the deep pages start half-way through those.
      targets.push({ size, target, deepAfter: BigInt(Math.floor((size === 0 ? PRELOADED : size) / 2)), results })
    }
    for (let round = 1; round <= harness.rounds; round++) {
      for (const load of SCALE_LOADS) {
        for (const { target, deepAfter, results } of targets) {
          const sample = await harness.measure(target, load, harness.durationSeconds, load === 'list' || load === 'list-tag' ? deepAfter : undefined)
          results.get(load)?.push(sample)
          process.stderr.write(`round ${round} ${target.name}/${load}: ${Math.round(sample.rps)} req/s, p99 ${sample.p99} ms\n`)
        }
      }
    }
    for (const { size, target, results } of targets) {
      for (const load of SCALE_LOADS) rows.push({ backend, size, load, ...summarize(results.get(load) ?? []) })
      await harness.servers.stop(target)
    }
  }
  const withRatios = rows.map((row) => {
    const empty = rows.find((other) => other.backend === row.backend && other.load === row.load && other.size === 0)
    return { ...row, ratioToEmpty: Number((row.rps / (empty?.rps ?? row.rps)).toFixed(2)) }
  })
  printScaleTable(harness, withRatios)
  const written = writeResultsFile('scale.json', asJson({ machine: harness.machine(), rows: withRatios }))
  process.stdout.write(`\nwrote ${written}\n`)
}

export function printScaleTable (harness: Harness, rows: ReadonlyArray<ScaleRow & { ratioToEmpty: number }>): void {
  const header = ['backend', 'plants', 'load', 'req/s', 'p99 ms', 'server µs/req', 'RSS MB', 'errors', '÷ empty', `${harness.generator.name} CPU`]
  const lines = rows.map((row) => [row.backend, String(row.size), row.load, String(row.rps), String(row.p99), String(row.serverCpuUs),
    String(row.rssMb), String(row.errors), row.ratioToEmpty.toFixed(2), generatorCell(row.generatorCpuShare, row.valid)])
  process.stdout.write(`\n${formatTable(header, lines)}\n`)
}
