import { cpus, loadavg } from 'node:os'
import { join, resolve as resolvePath } from 'node:path'
import { existsSync } from 'node:fs'
import { regimeLine, type Harness, type Part } from '../harness.js'
import { ROOT } from '../processes.js'
import { asJson, formatTable, writeResultsFile } from '../report.js'
import { versionOf } from './changes-helpers.js'
import { loadFeedStores, measureFeed, feedPaths, FEED_GOAL, type FeedStore } from './changes-feed.js'
import { printProfilePair, printTop, profileService, trimmed, type ProfiledLoad } from './changes-profiles.js'
import { measurePruning } from './changes-prune.js'
import { measureStreams, RSS_PER_STREAM_GOAL_KB, STREAM_P99_GOAL_MS, type StreamsResult } from './changes-streams.js'
import { ENGINES, GOAL_RELEASE, measureWrites, NOW, POST_GOAL, type Build, type Engine } from './changes-writes.js'
import { LoadAverages } from './query.js'

/**
 * `--only changes`: what the change log costs and how its streams hold up (issue 37's "Speed and
 * memory"). Five phases, each ending with the machine's load average meanwhile and the run's regime:
 *
 *   writes    POST of new plants on SQLite and PostgreSQL: this build against the release builds
 *             named (--baseline-dist: 1.7.0, the goal's reference; BENCH_CHANGES_ALSO=<root>[,<root>]:
 *             more, such as 1.8.0), and with one webhook subscription (events recorded, not delivered)
 *             against none, in interleaved rounds (changes-writes.ts)
 *   streams   1000 open streams on one SQLite instance while 500 writes/s go in: every event on every
 *             stream and its latency from the write's send time, RSS per open stream, server CPU per
 *             event per stream, the stream clients' CPU (changes-streams.ts)
 *   feed      a feed page of 100 changes at a random seq against a list page of 100 plants at a random
 *             id, stores of 200,000 plants and changes (BENCH_CHANGES_FEED=N), SQLite and PostgreSQL
 *             (changes-feed.ts)
 *   prune     a write's latency at 500 POST/s while a million expired changes (BENCH_CHANGES_PRUNE=N)
 *             are pruned by the service's retention, against none (changes-prune.ts); SQLite and
 *             PostgreSQL unless BENCH_CHANGES_PRUNE_ENGINES=sqlite
 *   profiles  CPU profiles: POST of this build against each release named on each engine, a feed page
 *             against a list page on each engine, and the streams' fan-out (changes-profiles.ts;
 *             BENCH_CHANGES_PROFILES=post,feed,streams for some)
 *
 * BENCH_CHANGES_PHASES=writes,feed runs some only. Figures go to bench/results/changes.json, those of a
 * run of some phases to changes-<phases>.json (-quick with --quick).
 */

const PHASES = ['writes', 'streams', 'feed', 'prune', 'profiles'] as const
type Phase = typeof PHASES[number]

/** The builds to compare with: --baseline-dist and BENCH_CHANGES_ALSO, oldest version first. */
function releasesOf (harness: Harness): Build[] {
  const roots = [...(harness.releaseRoot === undefined ? [] : [harness.releaseRoot]),
    ...(process.env.BENCH_CHANGES_ALSO ?? '').split(',').map((root) => root.trim()).filter((root) => root !== '').map((root) => resolvePath(root))]
  for (const root of roots) {
    if (!existsSync(join(root, 'dist', 'server.js'))) throw new Error(`${root}: no dist/server.js (build it first)`)
  }
  const byVersion = (version: string) => version.split('.').map(Number)
  return roots.map((root) => ({ label: versionOf(root), root }))
    .sort((a, b) => { const [x, y] = [byVersion(a.label), byVersion(b.label)]; return (x[0]! - y[0]!) || (x[1]! - y[1]!) || (x[2]! - y[2]!) })
}

export const changesPart: Part = {
  name: 'changes',
  owns: () => false,
  async compare (harness) {
    const phases = new Set((process.env.BENCH_CHANGES_PHASES ?? PHASES.join(',')).split(',').map((phase) => phase.trim()) as Phase[])
    const unknownPhase = [...phases].find((phase) => !PHASES.includes(phase))
    if (unknownPhase !== undefined) throw new Error(`BENCH_CHANGES_PHASES takes some of ${PHASES.join(', ')}; got ${JSON.stringify(unknownPhase)}`)
    const releases = releasesOf(harness)
    const results: Record<string, unknown> = { releases: releases.map((release) => ({ ...release, root: release.root })), loadAverages: {} }
    const load = new LoadAverages()
    const endPhase = async (phase: Phase) => {
      const seen = load.end()
      ;(results.loadAverages as Record<string, unknown>)[phase] = seen
      process.stdout.write(`load average (1 min) during ${phase}: ${seen.min}–${seen.max}, median ${seen.median}, on ${cpus().length} CPUs\n`)
      process.stdout.write(regimeLine(await harness.regime()))
    }
    const goals: string[][] = []
    if (phases.has('writes')) {
      load.start()
      const writes = await measureWrites(harness, releases)
      results.writes = writes
      for (const row of writes.comparisons.filter((comparison) => comparison.goal !== undefined)) {
        goals.push([`POST server CPU, ${row.engine}: ${row.what}`, `${row.ratio.toFixed(3)} (rounds ${row.range}${row.withDatabase === undefined ? '' : `; with db ${row.withDatabase.toFixed(3)}`})`,
          `≤ ${POST_GOAL.toFixed(2)}`, row.met === true ? 'met' : 'MISSED'])
      }
      if (!releases.some((release) => release.label === GOAL_RELEASE)) goals.push(['POST against 1.7.0', 'not measured: no --baseline-dist of 1.7.0', `≤ ${POST_GOAL}`, ''])
      await endPhase('writes')
    }
    if (phases.has('streams')) {
      load.start()
      const streams = await measureStreams(harness) as StreamsResult
      results.streams = streams
      goals.push([`every event on every stream (${streams.streams} streams, ${streams.writesPerSecond} writes/s), p99`,
        `${streams.events.p99Ms} ms; ${streams.events.delivered} of ${streams.events.expected} events`, `≤ ${STREAM_P99_GOAL_MS} ms, none missing`, streams.events.met ? 'met' : 'MISSED'])
      goals.push(['RSS per open stream', `${streams.rss.perStreamKb} KB`, `≤ ${RSS_PER_STREAM_GOAL_KB} KB`, streams.rss.met ? 'met' : 'MISSED'])
      goals.push(['server CPU per event per stream', `${streams.cpu.serverUsPerEvent} µs (${streams.cpu.serverUsPerEventOverWrites} over the writes' own); clients ${Math.round(streams.cpu.clientsShare * 100)} % of a core`, '(a figure)', ''])
      await endPhase('streams')
    }
    let feedStores: FeedStore[] | undefined
    const feedSize = Number(process.env.BENCH_CHANGES_FEED ?? (harness.quick ? 20_000 : 200_000))
    if (phases.has('feed')) {
      load.start()
      feedStores = await loadFeedStores(harness, feedSize)
      const feed = await measureFeed(harness, feedStores)
      results.feed = { size: feedSize, ...feed }
      for (const row of feed.comparisons) {
        goals.push([`feed page ÷ list page, ${row.engine}`, `${row.ratio.toFixed(3)} (rounds ${row.range}${row.withDatabase === undefined ? '' : `; with db ${row.withDatabase.toFixed(3)}`})`,
          `≤ ${FEED_GOAL}`, row.met ? 'met' : 'MISSED'])
      }
      await endPhase('feed')
    }
    if (phases.has('prune')) {
      load.start()
      const engines = (process.env.BENCH_CHANGES_PRUNE_ENGINES ?? ENGINES.join(',')).split(',').map((engine) => engine.trim()) as Engine[]
      const pruning = await measurePruning(harness, engines)
      results.prune = pruning
      for (const result of pruning) {
        goals.push([`write p99 while ${result.backlog} expired changes are pruned, ${result.engine}`,
          `${result.p99WithPruningMs} ms against ${result.p99WithoutMs} ms without (× ${result.ratio}); ${result.prunedPerSecond} pruned/s`, 'writers not held up', ''])
      }
      await endPhase('prune')
    }
    if (phases.has('profiles')) {
      load.start()
      if ((process.env.BENCH_CHANGES_PROFILES ?? 'feed').includes('feed')) feedStores ??= await loadFeedStores(harness, feedSize)
      results.profiles = await profileChanges(harness, releases, feedStores ?? [])
      await endPhase('profiles')
    }
    const regime = await harness.regime()
    process.stdout.write(`\nissue 37's goals (${new Date().toISOString()})\n${formatTable(['goal', 'measured', 'bound', ''], goals, 1)}\n${regimeLine(regime)}`)
    const partial = PHASES.some((phase) => !phases.has(phase)) ? `-${PHASES.filter((phase) => phases.has(phase)).join('-')}` : ''
    const written = writeResultsFile(`changes${partial}${harness.quick ? '-quick' : ''}.json`, asJson({
      machine: { ...harness.machine(), loadAverages: loadavg().map((value) => Number(value.toFixed(2))) },
      regime,
      regimeLine: regimeLine(regime).trim(),
      goals,
      ...results
    }))
    process.stdout.write(`\nwrote ${written}\n`)
    return []
  }
}

/** The profiles phase: POST against the goal's release, feed against list, the streams' fan-out. */
async function profileChanges (harness: Harness, releases: readonly Build[], feedStores: readonly FeedStore[]) {
  const pairs: Array<{ title: string, service: ProfiledLoad, reference: ProfiledLoad }> = []
  const profiles = new Set((process.env.BENCH_CHANGES_PROFILES ?? 'post,feed,streams').split(',').map((name) => name.trim()))
  const post = [{ load: 'post', measure: async (target: Parameters<typeof harness.measure>[0], seconds: number) => harness.measure(target, 'post', seconds) }]
  for (const engine of profiles.has('post') ? ENGINES : []) {
    // This build against every release named: the goal's, and the one before the change log.
    const profiled: ProfiledLoad[] = []
    for (const build of [{ label: NOW, root: ROOT }, ...releases]) {
      const name = `${engine}-${build.label}-profiled`
      profiled.push(...await profileService(harness, name, async (flags) => harness.servers.startService(name,
        engine === 'sqlite' ? `sqlite:${join(harness.workFolder, `${name}.db`)}` : await harness.postgresDatabase(), {}, build.root, flags), post))
    }
    const [service, ...references] = profiled as [ProfiledLoad, ...ProfiledLoad[]]
    references.forEach((reference, index) => {
      pairs.push({ title: `${engine} POST, ${NOW} against ${releases[index]?.label ?? ''}`, service, reference })
    })
  }
  for (const store of profiles.has('feed') ? feedStores : []) {
    const paths = feedPaths(store)
    const name = `${store.engine}-feed-profiled`
    const [feed, list] = await profileService(harness, name, async (flags) => harness.servers.startService(name, store.databaseUrl, {}, ROOT, flags), [
      { load: 'feed', measure: async (target, seconds) => harness.measurePaths(target, paths.feed, seconds) },
      { load: 'list', measure: async (target, seconds) => harness.measurePaths(target, paths.list, seconds) }
    ]) as [ProfiledLoad, ProfiledLoad]
    pairs.push({ title: `${store.engine} a feed page against a list page`, service: feed, reference: list })
  }
  for (const pair of pairs) printProfilePair(pair.title, pair.service, pair.reference)
  const streams = profiles.has('streams')
    ? await measureStreams(harness, join(harness.workFolder, 'changes-profiles', 'streams')) as { profile: Record<string, number>, mainUsPerEvent: number, events: number }
    : undefined
  if (streams !== undefined) {
    printTop(`the streams' fan-out, SQLite (profiled): main thread ${streams.mainUsPerEvent} µs per event per stream, ${streams.events} events`, streams.profile, 'µs/event/stream')
  }
  return {
    pairs: pairs.map((pair) => ({ title: pair.title, service: trimmed(pair.service), reference: trimmed(pair.reference) })),
    streams
  }
}
