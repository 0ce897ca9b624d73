import type { ChildProcess } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { ClientsReport } from '../changes-stream-clients.js'
import { monotonicMicros, readProfiles, selfTimeIn } from '../cpu-profile.js'
import { median } from '../figures.js'
import type { Harness } from '../harness.js'
import { mainThreadCpuSeconds, processCpuSeconds, ROOT, rssMb, serverPid, type Target } from '../processes.js'
import { formatTable } from '../report.js'
import { ask, fixed, forkHelper, scheduledSeconds, histogramPercentile, mergeHistograms, percentile, sleep, startWriter } from './changes-helpers.js'
import { topFunctions } from './changes-profiles.js'

/**
 * The changes part's stream phase: 1000 open streams on one SQLite instance while 500 writes a second go
 * in. The streams are held by client processes (bench/changes-stream-clients.ts) on the load
 * generator's core, the writes sent by another (bench/changes-writer.ts), open loop, each plant named
 * with its send time: an event's latency is its arrival on a stream less its write's send time. First
 * the service's RSS with no stream and with the 1000 streams idle; then the writes, with the streams
 * and without (the same writes, the streams closed): server CPU per event per stream is the difference
 * ÷ the events delivered. The clients' and the writer's CPU shares show whether they kept up.
 */

export const STREAMS = 1000
export const WRITES_PER_SECOND = 500
/** The goals: every event on every stream within 1 s p99; at most 50 KB of RSS per open stream. */
export const STREAM_P99_GOAL_MS = 1000
export const RSS_PER_STREAM_GOAL_KB = 50
const CLIENT_PROCESSES = 2
/** Time for the last writes' events to reach every stream after the writer stops. */
const TAIL_MS = 2000
const STEPS_PER_MS = 10

export interface StreamsResult {
  readonly streams: number
  readonly writesPerSecond: number
  readonly seconds: number
  readonly rss: {
    readonly withoutMb: number
    readonly withIdleStreamsMb: number
    readonly perStreamKb: number
    /** The JS heap's part of it (nodejs_heap_size_used_bytes of the service's metrics). */
    readonly heapUsedPerStreamKb: number
    readonly met: boolean
  }
  readonly writes: { readonly sent: number, readonly ok: number, readonly failures: Record<string, number>, readonly p99Ms: number, readonly p99WithoutStreamsMs: number }
  readonly events: {
    readonly delivered: number
    readonly expected: number
    readonly fewestOnAStream: number
    readonly endedStreams: number
    readonly outOfOrder: number
    readonly complete: boolean
    readonly p50Ms: number
    readonly p99Ms: number
    readonly p999Ms: number
    readonly maxMs: number
    readonly met: boolean
  }
  readonly cpu: {
    /** Server CPU (all threads) ÷ events delivered, in µs; and less what the same writes cost without streams. */
    readonly serverUsPerEvent: number
    readonly serverUsPerEventOverWrites: number
    readonly serverUsPerWriteWithoutStreams: number
    /** Shares of one core over the window: the server's, with and without streams, the clients' (all processes) and the writer's. */
    readonly serverShareWithStreams: number
    readonly serverShareWithoutStreams: number
    /** The share of the time the server's main thread was ready to run but waited for a CPU (the machine is shared). */
    readonly serverMainWaitingWithStreams: number
    readonly clientsShare: number
    readonly writerShare: number
  }
}

/** The latency and CPU of one loaded window, with the streams open (when `clients` are given) or not. */
async function loadedWindow (harness: Harness, target: Target, seconds: number, firstId: number, clients: readonly ChildProcess[]) {
  const pid = serverPid(target) as number
  for (const client of clients) await ask(client, { type: 'reset' }, 'reset')
  const clientsCpuBefore = clients.map((client) => processCpuSeconds(client.pid as number))
  const serverCpuBefore = processCpuSeconds(pid)
  const mainBefore = mainThreadCpuSeconds(pid)
  const scheduledBefore = scheduledSeconds(pid)
  const from = monotonicMicros()
  const started = performance.now()
  const writer = startWriter(harness, { url: target.url, token: target.token, rate: WRITES_PER_SECOND, seconds, firstId, connections: 16 })
  const written = await writer.done
  const writingSeconds = (performance.now() - started) / 1000
  const serverShareWriting = (processCpuSeconds(pid) - serverCpuBefore) / writingSeconds
  const mainThreadWaitingShare = (scheduledSeconds(pid).waiting - scheduledBefore.waiting) / writingSeconds
  await sleep(TAIL_MS)
  const wallSeconds = (performance.now() - started) / 1000
  const to = monotonicMicros()
  const serverCpu = processCpuSeconds(pid) - serverCpuBefore
  const mainAfter = mainThreadCpuSeconds(pid)
  const clientsCpu = clients.reduce((sum, client, index) => sum + processCpuSeconds(client.pid as number) - (clientsCpuBefore[index] as number), 0)
  const reports = await Promise.all(clients.map((client) => ask<ClientsReport>(client, { type: 'report' }, 'report')))
  const latencies = written.latencyMs.filter((latency) => latency >= 0)
  const bySecond: number[] = []
  for (let second = 0; second * 1000 < (written.sentAtMs.at(-1) ?? 0); second++) {
    bySecond.push(Math.round(percentile(written.latencyMs.filter((_, index) => Math.floor((written.sentAtMs[index] as number) / 1000) === second), 0.99)))
  }
  process.stderr.write(`changes streams: ${clients.length > 0 ? 'with' : 'without'} streams, the server ${Math.round(serverShareWriting * 100)} % busy while the writes went in, ` +
    `its main thread waiting for a CPU ${Math.round(mainThreadWaitingShare * 100)} % of the time; ` +
    `their p99 second by second: ${bySecond.join(' ')} ms\n`)
  return {
    written,
    serverShareWriting,
    mainThreadWaitingShare,
    writesP99Ms: fixed(percentile(latencies, 0.99)),
    reports,
    serverCpu,
    mainCpu: mainAfter.main - mainBefore.main,
    clientsCpu,
    wallSeconds,
    window: { from, to }
  }
}

/** The service's JS heap in use (its metrics' nodejs_heap_size_used_bytes), in MB; NaN without metrics. */
async function heapUsedMb (target: Target): Promise<number> {
  if (target.metricsUrl === undefined) return NaN
  const text = await (await fetch(`${target.metricsUrl}/metrics`)).text()
  return Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? NaN) / 1024 / 1024
}

/** The service's RSS, the median of samples over 2 s, in MB. */
async function steadyRssMb (pid: number): Promise<number> {
  const samples: number[] = []
  for (let index = 0; index < 20; index++) {
    samples.push(rssMb(pid))
    await sleep(100)
  }
  return median(samples)
}

/**
 * The phase. With `profileFolder`, the service runs under `node --cpu-prof` and only the loaded window
 * with streams is measured: its main thread's functions, µs per event per stream.
 */
export async function measureStreams (harness: Harness, profileFolder?: string): Promise<StreamsResult | { profile: Record<string, number>, mainUsPerEvent: number, events: number }> {
  const seconds = harness.quick ? 5 : profileFolder === undefined ? 30 : 10
  const flags = profileFolder === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileFolder}`]
  if (profileFolder !== undefined) mkdirSync(profileFolder, { recursive: true })
  const name = profileFolder === undefined ? 'sqlite-streams' : 'sqlite-streams-profiled'
  const target = await harness.servers.startService(name, `sqlite:${join(harness.workFolder, `${name}.db`)}`, {}, ROOT, flags)
  const pid = serverPid(target) as number
  const clients: ChildProcess[] = []
  let firstId = 1
  try {
    // Idle, as started: the streams' memory is not hidden in a heap that writes have grown.
    await harness.settle(target, 5000)
    const withoutMb = await steadyRssMb(pid)
    const heapWithoutMb = await heapUsedMb(target)
    for (let index = 0; index < CLIENT_PROCESSES; index++) clients.push(forkHelper(harness, 'changes-stream-clients.ts'))
    const opened = await Promise.all(clients.map((client, index) => ask<{ opened: number, refused: Record<string, number> }>(client,
      { type: 'open', url: target.url, token: target.token, streams: Math.floor(STREAMS / CLIENT_PROCESSES) + (index < STREAMS % CLIENT_PROCESSES ? 1 : 0) }, 'opened')))
    const openedCount = opened.reduce((sum, answer) => sum + answer.opened, 0)
    if (openedCount !== STREAMS) throw new Error(`${openedCount} of ${STREAMS} streams opened; refused: ${JSON.stringify(opened.map((answer) => answer.refused))}`)
    await sleep(3000)
    const withIdleStreamsMb = await steadyRssMb(pid)
    const heapWithMb = await heapUsedMb(target)
    process.stderr.write(`changes streams: ${STREAMS} open; RSS ${withoutMb.toFixed(1)} MB without, ${withIdleStreamsMb.toFixed(1)} MB with them idle\n`)
    // The write path and the fan-out compiled before anything is measured.
    await startWriter(harness, { url: target.url, token: target.token, rate: WRITES_PER_SECOND, seconds: harness.quick ? 1 : 3, firstId, connections: 16 }).done
    firstId += 10_000
    await sleep(TAIL_MS)
    await harness.settle(target, 5000)
    const loaded = await loadedWindow(harness, target, seconds, firstId, clients)
    firstId += WRITES_PER_SECOND * seconds + 10_000
    const histogram = mergeHistograms(loaded.reports.map((report) => report.histogram))
    const delivered = loaded.reports.reduce((sum, report) => sum + report.events, 0)
    if (profileFolder !== undefined) {
      for (const client of clients.splice(0)) await ask(client, { type: 'close' }, 'closed')
      await harness.servers.stop(target)
      const { main } = readProfiles(profileFolder)
      if (main === undefined) throw new Error('the profiled streams service wrote no CPU profile')
      const mainUsPerEvent = loaded.mainCpu / delivered * 1e6
      return { profile: topFunctions(selfTimeIn(main, loaded.window, ROOT), mainUsPerEvent, 25), mainUsPerEvent: fixed(mainUsPerEvent, 3), events: delivered }
    }
    for (const client of clients.splice(0)) await ask(client, { type: 'close' }, 'closed')
    await harness.settle(target, 5000)
    const without = await loadedWindow(harness, target, seconds, firstId, [])
    const expected = loaded.written.ok * STREAMS
    const fewestOnAStream = Math.min(...loaded.reports.map((report) => report.fewestOnAStream))
    const endedStreams = loaded.reports.reduce((sum, report) => sum + report.ended, 0)
    const outOfOrder = loaded.reports.reduce((sum, report) => sum + report.outOfOrder, 0)
    const complete = fewestOnAStream >= loaded.written.ok && endedStreams === 0 && outOfOrder === 0
    const p99Ms = histogramPercentile(histogram, 0.99, STEPS_PER_MS)
    const perStreamKb = (withIdleStreamsMb - withoutMb) * 1024 / STREAMS
    const result: StreamsResult = {
      streams: STREAMS,
      writesPerSecond: WRITES_PER_SECOND,
      seconds,
      rss: {
        withoutMb: fixed(withoutMb),
        withIdleStreamsMb: fixed(withIdleStreamsMb),
        perStreamKb: fixed(perStreamKb),
        heapUsedPerStreamKb: fixed((heapWithMb - heapWithoutMb) * 1024 / STREAMS),
        met: perStreamKb <= RSS_PER_STREAM_GOAL_KB
      },
      writes: { sent: loaded.written.sent, ok: loaded.written.ok, failures: loaded.written.failures, p99Ms: loaded.writesP99Ms, p99WithoutStreamsMs: without.writesP99Ms },
      events: {
        delivered,
        expected,
        fewestOnAStream,
        endedStreams,
        outOfOrder,
        complete,
        p50Ms: histogramPercentile(histogram, 0.5, STEPS_PER_MS),
        p99Ms,
        p999Ms: histogramPercentile(histogram, 0.999, STEPS_PER_MS),
        maxMs: histogramPercentile(histogram, 1, STEPS_PER_MS),
        met: complete && p99Ms <= STREAM_P99_GOAL_MS
      },
      cpu: {
        serverUsPerEvent: fixed(loaded.serverCpu / delivered * 1e6, 3),
        serverUsPerEventOverWrites: fixed((loaded.serverCpu - without.serverCpu * loaded.written.ok / Math.max(1, without.written.ok)) / delivered * 1e6, 3),
        serverUsPerWriteWithoutStreams: fixed(without.serverCpu / without.written.ok * 1e6),
        serverShareWithStreams: fixed(loaded.serverShareWriting, 2),
        serverShareWithoutStreams: fixed(without.serverShareWriting, 2),
        serverMainWaitingWithStreams: fixed(loaded.mainThreadWaitingShare, 2),
        clientsShare: fixed(loaded.clientsCpu / loaded.wallSeconds, 2),
        writerShare: fixed(loaded.written.processCpuSeconds / loaded.wallSeconds, 2)
      }
    }
    printStreams(result)
    return result
  } finally {
    for (const client of clients) client.kill('SIGKILL')
    await harness.servers.stop(target)
  }
}

function printStreams (result: StreamsResult): void {
  const { rss, writes, events, cpu } = result
  process.stdout.write(`\n${result.streams} change streams on one SQLite instance, ${result.writesPerSecond} POST/s for ${result.seconds} s (open loop); ` +
    'latency = arrival on a stream − the write\'s send time\n')
  process.stdout.write(`${formatTable(['figure', 'value', 'goal'], [
    ['RSS without streams', `${rss.withoutMb} MB`, ''],
    [`RSS with ${result.streams} idle streams`, `${rss.withIdleStreamsMb} MB`, ''],
    ['RSS per open stream', `${rss.perStreamKb} KB`, `≤ ${RSS_PER_STREAM_GOAL_KB} KB ${rss.met ? 'met' : 'MISSED'}`],
    ['JS heap used per open stream', `${rss.heapUsedPerStreamKb} KB`, ''],
    ['writes sent / answered 200', `${writes.sent} / ${writes.ok}${Object.keys(writes.failures).length > 0 ? ` (failures ${JSON.stringify(writes.failures)})` : ''}`, ''],
    ['write p99 with the streams / without', `${writes.p99Ms} / ${writes.p99WithoutStreamsMs} ms`, ''],
    ['events delivered / expected', `${events.delivered} / ${events.expected} (fewest on a stream ${events.fewestOnAStream}; ${events.endedStreams} streams ended, ${events.outOfOrder} out of order)`,
      events.complete ? 'every event on every stream' : 'EVENTS MISSING'],
    ['event latency p50 / p99 / p99.9 / max', `${events.p50Ms} / ${events.p99Ms} / ${events.p999Ms} / ${events.maxMs} ms`,
      `p99 ≤ ${STREAM_P99_GOAL_MS} ms ${events.met ? 'met' : 'MISSED'}`],
    ['server CPU per event per stream', `${cpu.serverUsPerEvent} µs (${cpu.serverUsPerEventOverWrites} µs over the writes' own)`, ''],
    ['server CPU per write without streams', `${cpu.serverUsPerWriteWithoutStreams} µs`, ''],
    ['server busy while writing, with / without streams', `${Math.round(cpu.serverShareWithStreams * 100)} % / ${Math.round(cpu.serverShareWithoutStreams * 100)} % of a core`, ''],
    ['server main thread waiting for a CPU (with streams)', `${Math.round(cpu.serverMainWaitingWithStreams * 100)} % of the time`, ''],
    ['stream clients\' CPU (all processes)', `${Math.round(cpu.clientsShare * 100)} % of a core`, cpu.clientsShare >= 0.9 ? 'INVALID: the clients were the bottleneck' : ''],
    ['writer\'s CPU', `${Math.round(cpu.writerShare * 100)} % of a core`, '']
  ], 1)}\n`)
}
