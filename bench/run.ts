/**
 * `npm run bench`: measures the real service (built dist/server.js, shipped default config) on SQLite,
 * PostgreSQL (embedded, as in the tests) and memory against a bare-Fastify baseline, in one run.
 *
 *   npm run bench                      full run: 5 interleaved rounds of 4 s per measurement
 *   npm run bench -- --quick           smoke run: 1 round of 1 s
 *   npm run bench -- --scale 1000000,10000000
 *                                      cost as the store grows: bulk-load N plants, then measure POST,
 *                                      GET by id and a deep list page against the empty store
 *
 * Servers run on CPU 0 and the load generator (autocannon, in this process) on CPU 1 when `taskset`
 * exists. Figures are medians over rounds; ratios are against the baseline of the same run.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import pg from 'pg'
import { openPostgresStore } from '../src/store/postgres.js'
import { openSqliteDatabase } from '../src/store/sqlite.js'
import { startEmbeddedPostgres, type PostgresServer } from '../test/postgres-server.js'
import { renderChart } from './chart.js'

const TOKEN = 'bench-token'
const CONNECTIONS = 50
const PRELOADED = 2000
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const RESULTS = join(ROOT, 'bench', 'results')

type Load = 'post' | 'get' | 'list'
const LOADS: readonly Load[] = ['post', 'get', 'list']

interface Sample { rps: number, p50: number, p99: number, rssMb: number, errors: number }
interface Target {
  readonly name: string
  readonly url: string
  readonly process: ChildProcess
  nextId: bigint
  preloadedIds: bigint[]
}

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const scaleArgument = args[args.indexOf('--scale') + 1]
const scaleSizes = args.includes('--scale') && scaleArgument !== undefined ? scaleArgument.split(',').map(Number) : undefined
const rounds = quick ? 1 : 5
const durationSeconds = quick ? 1 : 4

const pinning = existsSync('/usr/bin/taskset') && cpus().length >= 2
if (pinning) execFileSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' })
const serverCommand = (command: string[]) => pinning ? ['taskset', '-c', '0', ...command] : command

const workFolder = mkdtempSync(join(tmpdir(), 'plantstore-bench-'))
const started: ChildProcess[] = []
let postgres: PostgresServer | undefined

async function cleanUp (): Promise<void> {
  for (const child of started) if (child.exitCode === null && child.pid !== undefined) process.kill(child.pid, 'SIGKILL')
  await postgres?.destroy()
  rmSync(workFolder, { recursive: true, force: true })
}

/**
 * Starts a server with its standard output in a file, as a container runtime would take it off the
 * server's hands: the log lines cost the server their writes, but reading them does not cost the load
 * generator's core.
 */
function startProcess (name: string, command: string[], env: Record<string, string>): Promise<Target> {
  const [program, ...rest] = serverCommand(command)
  const logFile = join(workFolder, `${name}.log`)
  const logFd = openSync(logFile, 'w')
  const child = spawn(program as string, rest, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', PLANTSTORE_TOKENS: TOKEN, BENCH_TOKEN: TOKEN, ...env },
    stdio: ['ignore', logFd, 'inherit']
  })
  closeSync(logFd)
  started.push(child)
  return new Promise((resolve, reject) => {
    const startedAt = Date.now()
    const poll = setInterval(() => {
      const output = readFileSync(logFile, 'utf8')
      const url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1]
      if (url !== undefined) {
        clearInterval(poll)
        resolve({ name, url, process: child, nextId: 1_000_000_000_000n, preloadedIds: [] })
      } else if (child.exitCode !== null || Date.now() - startedAt > 30_000) {
        clearInterval(poll)
        reject(new Error(`${name} did not start (exit code ${child.exitCode}):\n${output.slice(-5000)}`))
      }
    }, 50)
  })
}

function startService (name: string, databaseUrl: string): Promise<Target> {
  return startProcess(name, [process.execPath, 'dist/server.js'], { DATABASE_URL: databaseUrl })
}

function rssMb (pid: number | undefined): number {
  if (pid === undefined) return 0
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match === null ? 0 : Number(match[1]) / 1024
}

/** The server's own PID: under taskset the child is taskset, which execs the server in place. */
const serverPid = (target: Target) => target.process.pid

function request (target: Target, load: Load, deepAfter?: bigint): autocannon.Request {
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }
  if (load === 'post') {
    return {
      method: 'POST',
      path: '/plants',
      headers,
      setupRequest: (req: autocannon.Request) => ({ ...req, body: `{"id":${target.nextId++},"name":"bench plant","tag":"bench"}` })
    }
  }
  if (load === 'get') {
    return {
      method: 'GET',
      headers,
      setupRequest: (req: autocannon.Request) => ({ ...req, path: `/plants/${target.preloadedIds[Math.floor(Math.random() * target.preloadedIds.length)]}` })
    }
  }
  return { method: 'GET', path: deepAfter === undefined ? '/plants?limit=100' : `/plants?limit=100&after=${deepAfter}`, headers }
}

async function measure (target: Target, load: Load, seconds: number, deepAfter?: bigint): Promise<Sample> {
  let peakRss = 0
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMb(serverPid(target))) }, 250)
  const result = await autocannon({
    url: target.url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [request(target, load, deepAfter)]
  })
  clearInterval(sampler)
  peakRss = Math.max(peakRss, rssMb(serverPid(target)))
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    rssMb: Math.round(peakRss),
    errors: result.errors + result.timeouts + result.non2xx
  }
}

async function preload (target: Target, count: number): Promise<void> {
  const ids = Array.from({ length: count }, (_, index) => BigInt(index + 1))
  for (let start = 0; start < ids.length; start += CONNECTIONS) {
    await Promise.all(ids.slice(start, start + CONNECTIONS).map(async (id) => {
      const response = await fetch(`${target.url}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: `{"id":${id},"name":"plant ${id}"}`
      })
      if (response.status !== 200) throw new Error(`${target.name}: preload answered ${response.status}`)
    }))
  }
  target.preloadedIds = ids
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] as number : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2
}

function summarize (samples: Sample[]) {
  return {
    rps: Math.round(median(samples.map((sample) => sample.rps))),
    p50: median(samples.map((sample) => sample.p50)),
    p99: median(samples.map((sample) => sample.p99)),
    rssMb: Math.max(...samples.map((sample) => sample.rssMb)),
    errors: samples.reduce((sum, sample) => sum + sample.errors, 0)
  }
}

function machine () {
  return {
    node: process.version,
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
    pinned: pinning ? 'servers on CPU 0, load generator on CPU 1' : 'not pinned (no taskset)',
    date: new Date().toISOString(),
    connections: CONNECTIONS,
    rounds,
    durationSeconds
  }
}

async function startPostgresDatabase (): Promise<string> {
  postgres ??= await startEmbeddedPostgres()
  const pid = postgres.pid()
  if (pinning && pid !== undefined) execFileSync('taskset', ['-a', '-p', '-c', '0', String(pid)], { stdio: 'ignore' })
  const name = `bench_${Date.now()}`
  const admin = new pg.Client({ connectionString: postgres.adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  return postgres.adminUrl.replace(/\/postgres$/, `/${name}`)
}

async function compareBackends (): Promise<void> {
  const targets = [
    await startProcess('baseline', [process.execPath, '--import', 'tsx', 'bench/baseline.ts'], {}),
    await startService('sqlite', `sqlite:${join(workFolder, 'bench.db')}`),
    await startService('postgres', await startPostgresDatabase()),
    await startService('memory', 'memory:')
  ]
  for (const target of targets) await preload(target, PRELOADED)

  const samples = new Map<string, Sample[]>()
  for (let round = 1; round <= rounds; round++) {
    for (const load of LOADS) {
      for (const target of targets) {
        const sample = await measure(target, load, durationSeconds)
        const key = `${target.name}/${load}`
        samples.set(key, [...(samples.get(key) ?? []), sample])
        process.stderr.write(`round ${round} ${key}: ${Math.round(sample.rps)} req/s, p99 ${sample.p99} ms\n`)
      }
    }
  }

  const rows = targets.flatMap((target) => LOADS.map((load) => {
    const summary = summarize(samples.get(`${target.name}/${load}`) ?? [])
    const baseline = summarize(samples.get(`baseline/${load}`) ?? [])
    return { target: target.name, load, ...summary, ratio: Number((summary.rps / baseline.rps).toFixed(2)) }
  }))
  printTable(rows)
  mkdirSync(RESULTS, { recursive: true })
  const file = quick ? 'quick' : 'latest'
  writeFileSync(join(RESULTS, `${file}.json`), JSON.stringify({ machine: machine(), rows }, null, 2) + '\n')
  writeFileSync(join(RESULTS, `${file}.svg`), renderChart(rows, machine()))
  process.stdout.write(`\nwrote bench/results/${file}.json and bench/results/${file}.svg\n`)
}

function printTable (rows: Array<{ target: string, load: string, rps: number, p50: number, p99: number, rssMb: number, errors: number, ratio: number }>): void {
  const header = ['target', 'load', 'req/s', 'p50 ms', 'p99 ms', 'RSS MB', 'errors', '÷ baseline']
  const lines = rows.map((row) => [row.target, row.load, String(row.rps), String(row.p50), String(row.p99), String(row.rssMb), String(row.errors), row.ratio.toFixed(2)])
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join('  ')
  process.stdout.write(`\n${format(header)}\n${lines.map(format).join('\n')}\n`)
}

async function bulkLoad (backend: 'sqlite' | 'postgres', size: number): Promise<string> {
  if (backend === 'sqlite') {
    const file = join(workFolder, `scale-${size}.db`)
    const db = openSqliteDatabase(file)
    db.pragma('synchronous = OFF')
    const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, NULL)')
    const chunk = db.transaction((from: number, to: number) => {
      for (let id = from; id < to; id++) insert.run(BigInt(id), `plant ${id}`)
    })
    for (let from = 1; from <= size; from += 100_000) chunk(from, Math.min(from + 100_000, size + 1))
    db.close()
    return `sqlite:${file}`
  }
  const url = await startPostgresDatabase()
  // Opening the store once applies the migrations, as the service would.
  await (await openPostgresStore(url, { poolSize: 1, connectTimeoutMs: 5000, statementTimeoutMs: 600_000 })).close()
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query('INSERT INTO plants (id, name) SELECT g, \'plant \' || g FROM generate_series(1, $1::bigint) AS g', [size])
  await client.query('VACUUM ANALYZE plants')
  await client.end()
  return url
}

async function compareSizes (sizes: number[]): Promise<void> {
  const rows: Array<{ backend: string, size: number, load: Load } & ReturnType<typeof summarize>> = []
  for (const backend of ['sqlite', 'postgres'] as const) {
    // Every size is loaded and started first, then measured in interleaved rounds, so that the
    // machine's drift weighs on each size alike.
    const targets = []
    for (const size of [0, ...sizes]) {
      const started = Date.now()
      const databaseUrl = await bulkLoad(backend, size)
      process.stderr.write(`${backend}: loaded ${size} plants in ${Math.round((Date.now() - started) / 1000)} s\n`)
      const target = await startService(`${backend}-${size}`, databaseUrl)
      if (size === 0) await preload(target, PRELOADED)
      else target.preloadedIds = Array.from({ length: 10_000 }, () => BigInt(1 + Math.floor(Math.random() * size)))
      const results: Record<Load, Sample[]> = { post: [], get: [], list: [] }
      targets.push({ size, target, deepAfter: BigInt(Math.floor(size / 2)), results })
    }
    for (let round = 1; round <= rounds; round++) {
      for (const load of LOADS) {
        for (const { target, deepAfter, results } of targets) {
          const sample = await measure(target, load, durationSeconds, load === 'list' ? deepAfter : undefined)
          results[load].push(sample)
          process.stderr.write(`round ${round} ${target.name}/${load}: ${Math.round(sample.rps)} req/s, p99 ${sample.p99} ms\n`)
        }
      }
    }
    for (const { size, target, results } of targets) {
      for (const load of LOADS) rows.push({ backend, size, load, ...summarize(results[load]) })
      process.kill(target.process.pid as number, 'SIGTERM')
      await new Promise((resolve) => target.process.once('exit', resolve))
    }
  }
  const withRatios = rows.map((row) => {
    const empty = rows.find((other) => other.backend === row.backend && other.load === row.load && other.size === 0)
    return { ...row, ratioToEmpty: Number((row.rps / (empty?.rps ?? row.rps)).toFixed(2)) }
  })
  const header = ['backend', 'plants', 'load', 'req/s', 'p99 ms', 'RSS MB', 'errors', '÷ empty']
  const lines = withRatios.map((row) => [row.backend, String(row.size), row.load, String(row.rps), String(row.p99), String(row.rssMb), String(row.errors), row.ratioToEmpty.toFixed(2)])
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => (line[column] ?? '').length)))
  const format = (cells: string[]) => cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join('  ')
  process.stdout.write(`\n${format(header)}\n${lines.map(format).join('\n')}\n`)
  mkdirSync(RESULTS, { recursive: true })
  writeFileSync(join(RESULTS, 'scale.json'), JSON.stringify({ machine: machine(), rows: withRatios }, null, 2) + '\n')
  process.stdout.write('\nwrote bench/results/scale.json\n')
}

try {
  if (scaleSizes !== undefined) await compareSizes(scaleSizes)
  else await compareBackends()
} finally {
  await cleanUp()
}
