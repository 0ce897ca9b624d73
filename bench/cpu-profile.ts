import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Reading V8 CPU profiles (`node --cpu-prof`): self time by function within a window of the profile,
 * and the same grouped by where the code lives (Node's core, a package, a file of this project).
 */

interface CallFrame { functionName: string, url: string, lineNumber: number }
interface ProfileNode { id: number, callFrame: CallFrame }
interface CpuProfile { nodes: ProfileNode[], startTime: number, samples: number[], timeDeltas: number[] }

/** A window of CLOCK_MONOTONIC in µs: V8 stamps its samples with that clock, and so does `monotonicMicros`. */
export interface Window { readonly from: number, readonly to: number }

export const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n)

/** Self samples in a window: by function (`name file:line`) and by place (`placeOf`), with the window's total. */
export interface SelfTime {
  readonly samples: number
  readonly byFunction: ReadonlyMap<string, number>
  readonly byPlace: ReadonlyMap<string, number>
}

/** The profiles a process wrote to `folder`: its main thread's (Node's thread id 0 in the name) and its workers'. */
export function readProfiles (folder: string): { main: CpuProfile | undefined, workers: CpuProfile[] } {
  const files = readdirSync(folder).filter((file) => file.endsWith('.cpuprofile')).sort()
  const read = (file: string) => JSON.parse(readFileSync(join(folder, file), 'utf8')) as CpuProfile
  // CPU.<date>.<time>.<pid>.<thread id>.<sequence>.cpuprofile
  const threadOf = (file: string) => file.split('.').at(-3)
  const mainFile = files.find((file) => threadOf(file) === '0')
  return { main: mainFile === undefined ? undefined : read(mainFile), workers: files.filter((file) => file !== mainFile).map(read) }
}

/** The self samples of `profile` stamped inside `window`. */
export function selfTimeIn (profile: CpuProfile, window: Window, root: string): SelfTime {
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]))
  const byFunction = new Map<string, number>()
  const byPlace = new Map<string, number>()
  let time = profile.startTime
  let samples = 0
  for (let index = 0; index < profile.samples.length; index++) {
    time += profile.timeDeltas[index] ?? 0
    if (time < window.from || time > window.to) continue
    const frame = frames.get(profile.samples[index] as number)
    if (frame === undefined) continue
    samples++
    const name = functionKey(frame, root)
    byFunction.set(name, (byFunction.get(name) ?? 0) + 1)
    const place = placeOf(frame, root)
    byPlace.set(place, (byPlace.get(place) ?? 0) + 1)
  }
  return { samples, byFunction, byPlace }
}

/** Samples V8 takes while the thread waits: not CPU time. */
export const IDLE = '(idle)'

function shortUrl (url: string, root: string): string {
  const path = url.replace(/^file:\/\//, '')
  const packageAt = path.lastIndexOf('/node_modules/')
  if (packageAt >= 0) return path.slice(packageAt + '/node_modules/'.length)
  return path.startsWith(root) ? path.slice(root.length) : path
}

function functionKey (frame: CallFrame, root: string): string {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName
  return frame.url === '' ? name : `${name} ${shortUrl(frame.url, root)}:${frame.lineNumber + 1}`
}

/**
 * Where a frame's code lives: V8's own entries ((garbage collector), (program), (idle)), Node's core
 * (`node:` modules), a package by name, a project file, or `native` for a builtin without a script.
 */
export function placeOf (frame: CallFrame, root: string): string {
  if (frame.url === '') return frame.functionName.startsWith('(') ? frame.functionName : 'native'
  if (frame.url.startsWith('node:')) return 'node core'
  const path = shortUrl(frame.url, root)
  if (frame.url.includes('/node_modules/')) {
    const parts = path.split('/')
    return (parts[0]?.startsWith('@') === true ? `${parts[0]}/${parts[1] ?? ''}` : parts[0]) ?? path
  }
  return path
}
