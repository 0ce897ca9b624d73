import { spawn } from 'node:child_process'
import { readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { median } from '../figures.js'
import type { Harness, Part } from '../harness.js'
import { ROOT, rssMb, serverNodeFlags, type Target } from '../processes.js'
import { asJson, formatTable, generatorCell, writeResultsFile } from '../report.js'
import { bulkLoad } from './scale.js'

/**
 * `--only data`: how fast a store's plants leave and enter it, and what a backup costs the writers.
 * `plantstore export --out` and `plantstore import` (dist/cli.js, as operators run them) on SQLite and
 * PostgreSQL stores of 1M and 10M plants (100,000 with --quick), with each command's peak RSS; the
 * service's own POST rate on the same backend for scale; and `plantstore backup` of a 1M-plant SQLite
 * store taken back to back for 10 s while 32 connections POST to its service, against 10 s without.
 * Figures go to bench/results/data.json; this part adds no rows to latest.json.
 */

const WRITERS = 32
const CLI = join(ROOT, 'dist', 'cli.js')
/** The Node.js flags of the command's `#!/usr/bin/env -S node …` line: what an operator's `plantstore` runs with. */
const CLI_NODE_FLAGS = (/^#!\/usr\/bin\/env -S node(.*)$/m.exec(readFileSync(join(ROOT, 'src', 'cli.ts'), 'utf8'))?.[1] ?? '').trim().split(/\s+/).filter((flag) => flag !== '')

interface CommandRun { readonly seconds: number, readonly peakRssMb: number, readonly stdout: string }

/**
 * Runs `plantstore …` to its end, sampling its peak RSS (VmHWM) until it exits; rejects on a non-zero
 * exit. Pinned, it runs on the servers' CPU, as a command run beside the service would.
 */
function runCommand (args: readonly string[], databaseUrl: string, pinned = false): Promise<CommandRun> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now()
    const command = [process.execPath, ...CLI_NODE_FLAGS, CLI, ...args]
    const [program, ...rest] = pinned ? ['taskset', '-c', '0', ...command] : command
    const child = spawn(program as string, rest, {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, DATABASE_STATEMENT_TIMEOUT_MS: '600000', METRICS_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let peakRssMb = 0
    const sample = (): void => { peakRssMb = Math.max(peakRssMb, peakRssOf(child.pid)) }
    const sampler = setInterval(sample, 100)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); sample() })
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); sample() })
    child.once('close', (code) => {
      clearInterval(sampler)
      const seconds = (performance.now() - startedAt) / 1000
      if (code === 0) resolve({ seconds, peakRssMb: Math.round(peakRssMb), stdout })
      else reject(new Error(`plantstore ${args.join(' ')} exited with ${code}: ${stderr.slice(-2000)}`))
    })
  })
}

/** The process's peak resident set so far, in MB (0 once it is gone). */
function peakRssOf (pid: number | undefined): number {
  if (pid === undefined) return 0
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
    return kb === undefined ? 0 : Number(kb) / 1024
  } catch {
    return 0
  }
}

interface TransferRow {
  readonly backend: string
  readonly plants: number
  readonly exportPlantsPerSecond: number
  readonly exportPeakRssMb: number
  readonly importPlantsPerSecond: number
  readonly importPeakRssMb: number
  readonly servicePostPerSecond: number
  readonly importPerPost: number
}

async function emptyStore (harness: Harness, backend: 'sqlite' | 'postgres', name: string): Promise<string> {
  return backend === 'sqlite' ? `sqlite:${join(harness.workFolder, `${name}.db`)}` : await harness.postgresDatabase()
}

function removeSqlite (databaseUrl: string): void {
  if (!databaseUrl.startsWith('sqlite:')) return
  const file = databaseUrl.slice('sqlite:'.length)
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true })
}

async function servicePostRate (harness: Harness, backend: 'sqlite' | 'postgres'): Promise<{ rps: number, serverCpuUs: number, generatorCpuShare: number, valid: boolean }> {
  const target = await harness.servers.startService(`${backend}-post`, await emptyStore(harness, backend, `${backend}-post`))
  const samples = []
  for (let round = 1; round <= harness.rounds; round++) {
    const sample = await harness.measure(target, 'post', harness.durationSeconds)
    harness.logSample(round, `${backend}/post`, sample)
    samples.push(sample)
  }
  await harness.servers.stop(target)
  const generatorCpuShare = median(samples.map((sample) => sample.generatorCpuShare))
  return { rps: median(samples.map((sample) => sample.rps)), serverCpuUs: median(samples.map((sample) => sample.serverCpuUs)), generatorCpuShare, valid: generatorCpuShare < 0.9 }
}

async function measureTransfers (harness: Harness, sizes: readonly number[]): Promise<{ rows: TransferRow[], posts: Record<string, Awaited<ReturnType<typeof servicePostRate>>> }> {
  const rows: TransferRow[] = []
  const posts: Record<string, Awaited<ReturnType<typeof servicePostRate>>> = {}
  for (const backend of ['sqlite', 'postgres'] as const) {
    const post = posts[backend] = await servicePostRate(harness, backend)
    for (const size of sizes) {
      const source = await bulkLoad(harness, backend, size)
      const file = join(harness.workFolder, `export-${backend}-${size}.ndjson`)
      const exported = await runCommand(['export', '--out', file], source)
      process.stderr.write(`${backend} ${size}: export ${exported.seconds.toFixed(1)} s, ${statSync(file).size} bytes, peak RSS ${exported.peakRssMb} MB\n`)
      removeSqlite(source)
      const target = await emptyStore(harness, backend, `import-${backend}-${size}`)
      const imported = await runCommand(['import', file], target)
      process.stderr.write(`${backend} ${size}: import ${imported.seconds.toFixed(1)} s, peak RSS ${imported.peakRssMb} MB: ${imported.stdout.trim()}\n`)
      removeSqlite(target)
      rmSync(file, { force: true })
      const importPlantsPerSecond = Math.round(size / imported.seconds)
      rows.push({
        backend,
        plants: size,
        exportPlantsPerSecond: Math.round(size / exported.seconds),
        exportPeakRssMb: exported.peakRssMb,
        importPlantsPerSecond,
        importPeakRssMb: imported.peakRssMb,
        servicePostPerSecond: Math.round(post.rps),
        importPerPost: Number((importPlantsPerSecond / post.rps).toFixed(2))
      })
    }
  }
  return { rows, posts }
}

interface BackupFigures {
  readonly plants: number
  readonly idleBackupSeconds: number
  /** The median of the backups taken under the writers, each a process from start to exit. */
  readonly loadedBackupSeconds: number
  readonly backupsDuringWindow: number
  readonly writersWithoutBackupRps: number
  readonly writersDuringBackupRps: number
  readonly ratio: number
  readonly generatorCpuShare: number
  readonly serverRssMb: number
}

/**
 * Backups of a store of `plants` taken one after another, for a whole window, while WRITERS connections
 * POST: the writers' rate in that window against windows of the same length just before and after.
 */
async function measureBackupUnderWriters (harness: Harness, plants: number): Promise<BackupFigures> {
  const databaseUrl = await bulkLoad(harness, 'sqlite', plants)
  const backupFile = join(harness.workFolder, 'backup.db')
  const idle = await runCommand(['backup', backupFile], databaseUrl, harness.pinning)
  const window = harness.quick ? 3 : 10
  const target: Target = await harness.servers.startService('sqlite-backup', databaseUrl)
  const before = await harness.measure(target, 'post', window, undefined, WRITERS)
  const loaded: number[] = []
  const backupWindow = { open: true }
  const backups = (async () => {
    while (backupWindow.open) loaded.push((await runCommand(['backup', backupFile, '--force'], databaseUrl, harness.pinning)).seconds)
  })()
  const during = await harness.measure(target, 'post', window, undefined, WRITERS)
  backupWindow.open = false
  await backups
  const after = await harness.measure(target, 'post', window, undefined, WRITERS)
  const serverRssMb = rssMb(target.process.pid)
  await harness.servers.stop(target)
  removeSqlite(databaseUrl)
  const without = (before.rps + after.rps) / 2
  return {
    plants,
    idleBackupSeconds: Number(idle.seconds.toFixed(2)),
    loadedBackupSeconds: Number(median(loaded).toFixed(2)),
    backupsDuringWindow: loaded.length,
    writersWithoutBackupRps: Math.round(without),
    writersDuringBackupRps: Math.round(during.rps),
    ratio: Number((during.rps / without).toFixed(2)),
    generatorCpuShare: Math.max(before.generatorCpuShare, during.generatorCpuShare, after.generatorCpuShare),
    serverRssMb: Math.round(serverRssMb)
  }
}

export const dataPart: Part = {
  name: 'data',
  owns: () => false,
  async compare (harness) {
    const sizes = harness.quick ? [100_000] : [1_000_000, 10_000_000]
    const { rows, posts } = await measureTransfers(harness, sizes)
    const backup = await measureBackupUnderWriters(harness, harness.quick ? 100_000 : 1_000_000)
    const header = ['backend', 'plants', 'export /s', 'export RSS MB', 'import /s', 'import RSS MB', 'service POST /s', 'import ÷ POST']
    const lines = rows.map((row) => [row.backend, row.plants.toLocaleString('en-US'), String(row.exportPlantsPerSecond), String(row.exportPeakRssMb),
      String(row.importPlantsPerSecond), String(row.importPeakRssMb), String(row.servicePostPerSecond), row.importPerPost.toFixed(2)])
    process.stdout.write(`\n${formatTable(header, lines)}\n`)
    for (const [backend, post] of Object.entries(posts)) {
      process.stdout.write(`service POST on ${backend}: ${post.serverCpuUs.toFixed(1)} µs CPU per request, ${harness.generator.name} ${generatorCell(post.generatorCpuShare, post.valid)}\n`)
    }
    process.stdout.write(`\nbackup of ${backup.plants.toLocaleString('en-US')} plants: ${backup.idleBackupSeconds} s idle, ${backup.loadedBackupSeconds} s under ${WRITERS} writers ` +
      `(${backup.backupsDuringWindow} back to back); ` +
      `writers ${backup.writersDuringBackupRps} POST/s during it ÷ ${backup.writersWithoutBackupRps} without = ${backup.ratio.toFixed(2)} ` +
      `(${harness.generator.name} ${Math.round(backup.generatorCpuShare * 100)} % of a core)\n`)
    const written = writeResultsFile(harness.quick ? 'data-quick.json' : 'data.json', asJson({ machine: { ...harness.machine(), serverNodeFlags: serverNodeFlags(ROOT).join(' ') }, transfers: rows, posts, backup }))
    process.stdout.write(`wrote ${written}\n`)
    return []
  }
}
