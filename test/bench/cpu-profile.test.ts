import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { monotonicMicros, readProfiles, selfTimeIn } from '../../bench/cpu-profile.js'

const folder = mkdtempSync(join(tmpdir(), 'plantstore-cpu-profile-'))
afterAll(() => { rmSync(folder, { recursive: true, force: true }) })

/** A real `node --cpu-prof` run: 300 ms in `spinFirst`, then 300 ms in `spinSecond`, with the monotonic time between them printed. */
function profileTwoPhases (): { between: number, started: number, ended: number } {
  const script = join(folder, 'phases.mjs')
  writeFileSync(script, [
    'function spinFirst () { const end = performance.now() + 300; let x = 0; while (performance.now() < end) for (let i = 0; i < 100000; i++) x += Math.sqrt(x + i); return x }',
    'function spinSecond () { const end = performance.now() + 300; let x = 0; while (performance.now() < end) for (let i = 0; i < 100000; i++) x += Math.sqrt(x + i); return x }',
    'spinFirst()',
    'console.log(Number(process.hrtime.bigint() / 1000n))',
    'spinSecond()'
  ].join('\n'))
  const started = monotonicMicros()
  const output = execFileSync(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${join(folder, 'profiles')}`, script], { encoding: 'utf8' })
  return { between: Number(output.trim()), started, ended: monotonicMicros() }
}

describe('bench/cpu-profile: self time of a real profile within a window of the monotonic clock', () => {
  const { between, started, ended } = profileTwoPhases()
  const { main, workers } = readProfiles(join(folder, 'profiles'))

  it('finds the main thread\'s profile and no worker\'s', () => {
    expect(main).toBeDefined()
    expect(workers).toEqual([])
  })

  it('gives each half of the run the function that ran in it', () => {
    if (main === undefined) throw new Error('no profile')
    const first = selfTimeIn(main, { from: started, to: between }, `${folder}/`)
    const second = selfTimeIn(main, { from: between, to: ended }, `${folder}/`)
    const busiest = (byFunction: ReadonlyMap<string, number>) => [...byFunction].sort(([, a], [, b]) => b - a)[0]?.[0]
    expect(busiest(first.byFunction)).toBe('spinFirst phases.mjs:1')
    expect(busiest(second.byFunction)).toBe('spinSecond phases.mjs:2')
    expect(first.byFunction.get('spinSecond phases.mjs:2')).toBeUndefined()
    expect(first.samples).toBeGreaterThan(50)
    expect(second.samples).toBeGreaterThan(50)
    // Most of each half, not all: on a loaded machine the process waits for a core, and samples taken
    // meanwhile land in V8's own entries.
    expect(first.byPlace.get('phases.mjs')).toBeGreaterThan(first.samples * 0.5)
    expect(second.byPlace.get('phases.mjs')).toBeGreaterThan(second.samples * 0.5)
  })
})
