import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { endedChildrenCpuSeconds } from './processes.js'

/**
 * The bench's load generators and the readings that say whether to believe them. wrk (C, one thread
 * pinned to the other core) is preferred: it has several times autocannon's headroom on one core.
 * autocannon, in this process, is the fallback where wrk cannot be had.
 */

export type Load = 'post' | 'get' | 'list' | 'put' | 'patch' | 'list-tag' | 'batch' | 'paths'

/** The tag a preloaded plant gets, so that a filtered page (`list-tag`) has as many plants as an unfiltered one. */
export const preloadedTagOf = (id: bigint | number) => `tag-${BigInt(id) % 4n}`
/** The tag whose plants `list-tag` pages through. */
export const LISTED_TAG = 'tag-1'

export interface LoadSpec {
  readonly url: string
  readonly token: string
  readonly load: Load
  readonly connections: number
  readonly seconds: number
  /** POST: ids from here up, unique per measurement. */
  readonly firstNewId: bigint
  /** GET: ids picked at random from 1 to this; PUT and PATCH: the ids 1 to this in turn, so those in flight differ. */
  readonly preloaded: number
  /** list, list-tag: the page after this id (the first page when absent). */
  readonly after?: bigint
  /** list-tag: the tag (LISTED_TAG when absent). */
  readonly tag?: string
  /** batch: the creates in each POST /plants/batch (new ids from `firstNewId` up, as POST's). */
  readonly batchSize?: number
  /**
   * paths: GETs of these paths (with their query strings), each request the next of the list from a
   * random start, round and round: a list longer than the connections never has two requests for the
   * same path in flight. The caller shuffles it.
   */
  readonly paths?: readonly string[]
  /** paths: headers every request sends besides Authorization (`Prefer`, say). */
  readonly headers?: Readonly<Record<string, string>>
}

export interface LoadResult {
  readonly requests: number
  readonly seconds: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly errors: number
  /** The load generator's CPU time ÷ wall time: 1 is one core fully busy. */
  readonly generatorCpuShare: number
}

const WRK = '/usr/bin/wrk'

/** wrk when it is installed or can be (Debian's package, as root); otherwise undefined. */
export function findWrk (): string | undefined {
  if (existsSync(WRK)) return WRK
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) return undefined
  try {
    process.stderr.write('installing wrk (Debian package) for the load generator\n')
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'wrk'], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
  } catch {
    try {
      execFileSync('apt-get', ['update', '-qq'], { stdio: 'ignore' })
      execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'wrk'], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
    } catch {
      return undefined
    }
  }
  return existsSync(WRK) ? WRK : undefined
}

function pathOf (spec: LoadSpec): string {
  const after = spec.after === undefined ? '' : `&after=${spec.after}`
  if (spec.load === 'list') return `/plants?limit=100${after}`
  if (spec.load === 'list-tag') return `/plants?limit=100${after}&tag=${encodeURIComponent(spec.tag ?? LISTED_TAG)}`
  return '/plants'
}

function batchSizeOf (spec: LoadSpec): number {
  if (spec.batchSize === undefined || !Number.isInteger(spec.batchSize) || spec.batchSize < 1) throw new Error('a batch load needs a batchSize of 1 or more')
  return spec.batchSize
}

/** A `paths` load's paths: printable ASCII each (query strings percent-encoded), so that they pass through a Lua string and a line as they are. */
function pathsOf (spec: LoadSpec): readonly string[] {
  const paths = spec.paths ?? []
  if (paths.length === 0) throw new Error('a paths load needs paths')
  const unfit = paths.find((path) => !/^\/[\x21-\x7e]*$/.test(path))
  if (unfit !== undefined) throw new Error(`a path of a paths load must be printable ASCII without spaces: ${JSON.stringify(unfit)}`)
  return paths
}

/** A Lua string literal of printable ASCII text. */
const luaString = (text: string) => `"${text.replace(/[\\"]/g, '\\$&')}"`

/** PUT replaces a preloaded plant with a new name and its own tag; PATCH renames it. */
const UPDATE_MEDIA_TYPE = { put: 'application/json', patch: 'application/merge-patch+json' } as const

/** The wrk script of one measurement: the requests, and a JSON line of results at the end; `pathsFile` holds a `paths` load's paths, one a line. */
function wrkScript (spec: LoadSpec, pathsFile: string): string {
  const mediaType = spec.load === 'put' || spec.load === 'patch' ? UPDATE_MEDIA_TYPE[spec.load] : 'application/json'
  const headers = `wrk.headers["Authorization"] = "Bearer ${spec.token}"\nwrk.headers["Content-Type"] = "${mediaType}"\n`
  const done = `
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests":%d,"micros":%d,"p50":%d,"p99":%d,"errors":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
`
  if (spec.load === 'post') {
    // One wrk thread: a plain counter gives every request its own id.
    return `${headers}wrk.method = "POST"\nlocal next_id = ${spec.firstNewId}\n` +
      'function request()\n  next_id = next_id + 1\n' +
      '  return wrk.format(nil, "/plants", nil, \'{"id":\' .. next_id .. \',"name":"bench plant","tag":"bench"}\')\nend\n' + done
  }
  if (spec.load === 'batch') {
    return `${headers}wrk.method = "POST"\nwrk.path = "/plants/batch"\nlocal next_id = ${spec.firstNewId}\n` +
      `function request()\n  local operations = {}\n  for i = 1, ${batchSizeOf(spec)} do\n    next_id = next_id + 1\n` +
      '    operations[i] = \'{"method":"POST","body":{"id":\' .. next_id .. \',"name":"bench plant","tag":"bench"}}\'\n  end\n' +
      '  return wrk.format(nil, nil, nil, \'{"operations":[\' .. table.concat(operations, ",") .. "]}")\nend\n' + done
  }
  if (spec.load === 'put' || spec.load === 'patch') {
    const body = spec.load === 'put'
      ? '\'{"name":"bench plant \' .. version .. \'","tag":"tag-\' .. (id % 4) .. \'"}\''
      : '\'{"name":"bench plant \' .. version .. \'"}\''
    return `${headers}wrk.method = "${spec.load.toUpperCase()}"\nlocal id = 0\nlocal version = 0\n` +
      `function request()\n  id = id % ${spec.preloaded} + 1\n  version = version + 1\n` +
      `  return wrk.format(nil, "/plants/" .. id, nil, ${body})\nend\n` + done
  }
  if (spec.load === 'paths') {
    const extra = Object.entries(spec.headers ?? {}).map(([name, value]) => `wrk.headers[${luaString(name)}] = ${luaString(value)}\n`).join('')
    // Read from a file: a table of tens of thousands of constants in the script would pass LuaJIT's limits.
    return `${headers}${extra}local paths = {}\nfor line in io.lines(${luaString(pathsFile)}) do paths[#paths + 1] = line end\n` +
      `math.randomseed(${Date.now() % 1_000_000})\nlocal next_path = math.random(#paths)\n` +
      'function request()\n  next_path = next_path % #paths + 1\n  return wrk.format("GET", paths[next_path])\nend\n' + done
  }
  if (spec.load === 'get') {
    return `${headers}math.randomseed(${Date.now() % 1_000_000})\n` +
      `function request()\n  return wrk.format("GET", "/plants/" .. math.random(1, ${spec.preloaded}))\nend\n` + done
  }
  return `${headers}wrk.method = "GET"\nwrk.path = "${pathOf(spec)}"\n${done}`
}

async function runWrk (wrk: string, spec: LoadSpec, pinToCpu: number | undefined): Promise<LoadResult> {
  // wrk loads its script once per thread and once more for itself: it must be a file.
  const folder = mkdtempSync(join(tmpdir(), 'plantstore-wrk-'))
  const script = join(folder, `${spec.load}.lua`)
  const pathsFile = join(folder, 'paths.txt')
  if (spec.load === 'paths') writeFileSync(pathsFile, `${pathsOf(spec).join('\n')}\n`)
  writeFileSync(script, wrkScript(spec, pathsFile))
  // A batch of a thousand writes, or a counted search, may wait behind 49 others: longer than wrk's 2 s default,
  // which would count it an error.
  const timeout = spec.load === 'batch' || spec.load === 'paths' ? ['--timeout', '30s'] : []
  const command = [wrk, '-t1', `-c${spec.connections}`, `-d${spec.seconds}s`, ...timeout, '-s', script, spec.url]
  const [program, ...args] = pinToCpu === undefined ? command : ['taskset', '-c', String(pinToCpu), ...command]
  const cpuBefore = endedChildrenCpuSeconds()
  const started = performance.now()
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(program as string, args, { stdio: ['ignore', 'pipe', 'inherit'] })
    let text = ''
    child.stdout.on('data', (chunk: Buffer) => { text += chunk.toString() })
    child.once('error', reject)
    child.once('exit', (code) => code === 0 ? resolve(text) : reject(new Error(`wrk exited with ${code}:\n${text}`)))
  }).finally(() => { rmSync(folder, { recursive: true, force: true }) })
  const wallSeconds = (performance.now() - started) / 1000
  const line = /WRK_RESULT (\{.*\})/.exec(output)?.[1]
  if (line === undefined) throw new Error(`wrk printed no result:\n${output}`)
  const result = JSON.parse(line) as { requests: number, micros: number, p50: number, p99: number, errors: number }
  return {
    requests: result.requests,
    seconds: result.micros / 1e6,
    p50Ms: result.p50 / 1000,
    p99Ms: result.p99 / 1000,
    errors: result.errors,
    generatorCpuShare: (endedChildrenCpuSeconds() - cpuBefore) / wallSeconds
  }
}

async function runAutocannon (spec: LoadSpec): Promise<LoadResult> {
  const headers = { authorization: `Bearer ${spec.token}`, 'content-type': 'application/json' }
  let nextId = spec.firstNewId
  let version = 0
  const update = (load: 'put' | 'patch'): autocannon.Request => ({
    method: load === 'put' ? 'PUT' : 'PATCH',
    headers: { ...headers, 'content-type': UPDATE_MEDIA_TYPE[load] },
    setupRequest: (req: autocannon.Request) => {
      const id = version++ % spec.preloaded + 1
      const body = load === 'put' ? `{"name":"bench plant ${version}","tag":"${preloadedTagOf(id)}"}` : `{"name":"bench plant ${version}"}`
      return { ...req, path: `/plants/${id}`, body }
    }
  })
  const batchRequest = (): autocannon.Request => ({
    method: 'POST',
    path: '/plants/batch',
    headers,
    setupRequest: (req: autocannon.Request) => {
      const operations = Array.from({ length: batchSizeOf(spec) }, () => `{"method":"POST","body":{"id":${++nextId},"name":"bench plant","tag":"bench"}}`)
      return { ...req, body: `{"operations":[${operations.join(',')}]}` }
    }
  })
  let nextPath = Math.floor(Math.random() * (spec.paths?.length ?? 1))
  const pathsRequest = (): autocannon.Request => ({
    method: 'GET',
    headers: { ...headers, ...spec.headers },
    setupRequest: (req: autocannon.Request) => {
      const paths = pathsOf(spec)
      nextPath = (nextPath + 1) % paths.length
      return { ...req, path: paths[nextPath] as string }
    }
  })
  const request: autocannon.Request = spec.load === 'post'
    ? { method: 'POST', path: '/plants', headers, setupRequest: (req: autocannon.Request) => ({ ...req, body: `{"id":${++nextId},"name":"bench plant","tag":"bench"}` }) }
    : spec.load === 'batch'
      ? batchRequest()
      : spec.load === 'get'
        ? { method: 'GET', headers, setupRequest: (req: autocannon.Request) => ({ ...req, path: `/plants/${1 + Math.floor(Math.random() * spec.preloaded)}` }) }
        : spec.load === 'put' || spec.load === 'patch'
          ? update(spec.load)
          : spec.load === 'paths' ? pathsRequest() : { method: 'GET', path: pathOf(spec), headers }
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  const result = await autocannon({ url: spec.url, connections: spec.connections, duration: spec.seconds, requests: [request] })
  const wallSeconds = (performance.now() - started) / 1000
  const cpu = process.cpuUsage(cpuBefore)
  return {
    requests: result.requests.total,
    seconds: result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx,
    generatorCpuShare: (cpu.user + cpu.system) / 1e6 / wallSeconds
  }
}

export interface LoadGenerator {
  readonly name: 'wrk' | 'autocannon'
  run: (spec: LoadSpec) => Promise<LoadResult>
}

export function loadGenerator (pinToCpu: number | undefined): LoadGenerator {
  const wrk = process.env.BENCH_LOAD_GENERATOR === 'autocannon' ? undefined : findWrk()
  if (wrk !== undefined) return { name: 'wrk', run: async (spec) => runWrk(wrk, spec, pinToCpu) }
  return { name: 'autocannon', run: runAutocannon }
}
