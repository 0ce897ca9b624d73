import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { dirname, join, posix } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { parseCommandLine } from '../../src/cli/commands.js'
import { temporaryFolder } from '../helpers/app.js'
import { outputOf, type ChildOutput } from '../helpers/child-output.js'
import { CLI, runCli } from '../helpers/cli-process.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

/**
 * deploy/kubernetes/export, the nightly export added to deploy/kubernetes/postgres: that kustomize
 * applies its manifests and no Secret, that its pod is hardened as the Deployment's and reads the same
 * database Secret, that the README states its schedule and policies, and that its two steps, run as
 * written by a real shell with the real command, export a PostgreSQL store and keep the newest exports.
 */

const KUBERNETES = new URL('../../deploy/kubernetes/', import.meta.url)
const FOLDER = new URL('export/', KUBERNETES)
const README = new URL('README.md', KUBERNETES)
const EXPORTS = '/exports'
const KEPT_EXPORTS = 14
/** What the export step's shell substitutes into the file name: the UTC date-time, by `date`. */
const DATE_PLACEHOLDER = '$(date -u +%Y%m%dT%H%M%SZ)'
const EXPORT_NAME = /^plants-(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z\.ndjson$/
const PLANTS = '{"id":-3,"name":"Aloe","tag":"sun"}\n{"id":1,"name":"Monstera"}\n{"id":9007199254740993,"name":"Fern","tag":"shade"}\n'

type Labels = Record<string, string>
interface Manifest { apiVersion: string, kind: string, metadata: { name: string, labels?: Labels } }
interface VolumeMount { name: string, mountPath: string, readOnly?: boolean }
interface Container {
  name: string
  image: string
  command?: string[]
  args?: string[]
  env?: Array<{ name: string, value?: string, valueFrom?: unknown }>
  envFrom?: unknown[]
  resources?: { requests?: Record<string, string>, limits?: Record<string, string> }
  securityContext?: Record<string, unknown>
  volumeMounts?: VolumeMount[]
}
interface Volume {
  name: string
  emptyDir?: { medium?: string, sizeLimit?: string }
  secret?: { secretName: string, items?: Array<{ key: string, path: string }>, defaultMode?: number }
  persistentVolumeClaim?: { claimName: string }
}
interface PodSpec {
  restartPolicy?: string
  automountServiceAccountToken?: boolean
  enableServiceLinks?: boolean
  securityContext?: Record<string, unknown>
  topologySpreadConstraints?: Array<{ labelSelector?: { matchLabels?: Labels } }>
  initContainers?: Container[]
  containers: Container[]
  volumes?: Volume[]
}
interface PodTemplate { metadata: { labels?: Labels }, spec: PodSpec }
interface CronJob extends Manifest {
  spec: {
    schedule: string
    timeZone?: string
    concurrencyPolicy?: string
    startingDeadlineSeconds?: number
    successfulJobsHistoryLimit?: number
    failedJobsHistoryLimit?: number
    jobTemplate: { spec: { backoffLimit?: number, activeDeadlineSeconds?: number, template: PodTemplate } }
  }
}
interface Deployment extends Manifest { spec: { selector: { matchLabels: Labels }, template: PodTemplate } }
interface Selecting extends Manifest { spec: { selector: Labels | { matchLabels: Labels } } }
interface PersistentVolumeClaim extends Manifest { spec: { accessModes: string[] } }

function documents (folder: URL, file: string): unknown[] {
  return parseAllDocuments(readFileSync(new URL(file, folder), 'utf8')).map((document) => document.toJS() as unknown)
}

/** What `kubectl apply -k <folder>` applies: every document of every resource its kustomization.yaml lists. */
function applied (folder: URL): Manifest[] {
  const [kustomization] = documents(folder, 'kustomization.yaml') as Array<{ resources: string[] }>
  return (kustomization?.resources ?? []).flatMap((file) => documents(folder, file) as Manifest[])
}

function one<T extends Manifest> (manifests: Manifest[], kind: string): T {
  const found = manifests.filter((manifest) => manifest.kind === kind)
  expect(found.map((manifest) => manifest.kind)).toEqual([kind])
  return found[0] as T
}

const cronJob = () => one<CronJob>(applied(FOLDER), 'CronJob')
const pod = () => cronJob().spec.jobTemplate.spec.template.spec
const postgres = () => applied(new URL('postgres/', KUBERNETES))
const deployment = () => one<Deployment>(postgres(), 'Deployment')

function containerOf (spec: PodSpec, name: string): Container {
  const found = [...(spec.initContainers ?? []), ...spec.containers].filter((each) => each.name === name)
  expect(found.map((each) => each.name)).toEqual([name])
  return found[0] as Container
}

/** The two steps, in the order the kubelet runs them: the export (an init container), then the pruning. */
const exportStep = () => containerOf(pod(), 'export')
const pruneStep = () => containerOf(pod(), 'prune')

function volumeOf (spec: PodSpec, name: string): Volume {
  const found = (spec.volumes ?? []).filter((each) => each.name === name)
  expect(found.map((each) => each.name)).toEqual([name])
  return found[0] as Volume
}

function mountAt (container: Container, mountPath: string): VolumeMount {
  const found = (container.volumeMounts ?? []).filter((mount) => mount.mountPath === mountPath)
  expect(found.map((mount) => mount.mountPath)).toEqual([mountPath])
  return found[0] as VolumeMount
}

const envValue = (container: Container, name: string) => container.env?.find((variable) => variable.name === name)?.value

/** A step's shell script: the image has no entrypoint, and each step is `/bin/sh -c SCRIPT`. */
function scriptOf (container: Container): string {
  expect(container.command).toEqual(['/bin/sh', '-c'])
  expect(container.args?.length).toBe(1)
  return container.args?.[0] ?? ''
}

/**
 * The words of the export step's command as the shell splits them, the date placeholder filled: the
 * script may hold only plain words, double-quoted words without escapes and the placeholder.
 */
function exportWords (dateTime: string): string[] {
  const script = scriptOf(exportStep()).trim()
  const filled = script.replaceAll(DATE_PLACEHOLDER, dateTime)
  expect(filled).not.toMatch(/[$`'\\;&|<>\n]/)
  return [...filled.matchAll(/"([^"]*)"|[^\s"]+/g)].map((match) => match[1] ?? match[0])
}

function bytes (quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity)
  expect(match, `memory quantity ${quantity}`).not.toBe(null)
  const units: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }
  return Number(match?.[1]) * (units[match?.[2] ?? ''] ?? 1)
}

const selects = (selector: Labels, labels: Labels) => Object.entries(selector).every(([key, value]) => labels[key] === value)

/**
 * A step's script run by /bin/sh with /exports (and the Secret's folder) moved to `paths`' folders,
 * `plantstore` on the PATH as in the image (a link to the CLI), and only the step's env besides PATH.
 */
function runStep (container: Container, paths: { exports: string, secrets?: string }, bin: string): Promise<ChildOutput> {
  const script = scriptOf(container).trim().replace(/(?<=^|\s|")\/exports(?=\/|\s|$)/g, paths.exports)
  expect(script).not.toMatch(/(^|\s|")\/exports\b/)
  const env: Record<string, string> = { PATH: `${bin}:${dirname(process.execPath)}:/usr/bin:/bin` }
  for (const { name, value } of container.env ?? []) env[name] = value ?? ''
  if (paths.secrets !== undefined) {
    for (const name of Object.keys(env).filter((each) => each.endsWith('_FILE'))) env[name] = join(paths.secrets, env[name] ?? '')
  }
  return outputOf(spawn('/bin/sh', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] }))
}

/** A folder holding `plantstore`, a link to the CLI, as the image's /usr/local/bin does. */
function binFolder (): string {
  const bin = temporaryFolder()
  symlinkSync(CLI, join(bin, 'plantstore'))
  return bin
}

const secondsAgo = (seconds: number) => new Date(Date.now() - seconds * 1000)

describe('deploy/kubernetes/export', () => {
  it('has YAML files that parse without errors or warnings, each a manifest', () => {
    const files = readdirSync(FOLDER).filter((name) => name.endsWith('.yaml')).sort()
    expect(files).toEqual(['cronjob.yaml', 'kustomization.yaml', 'persistentvolumeclaim.yaml'])
    for (const file of files) {
      const parsed = parseAllDocuments(readFileSync(new URL(file, FOLDER), 'utf8'))
      expect(parsed.flatMap((document) => [...document.errors, ...document.warnings].map(String)), file).toEqual([])
      for (const manifest of parsed.map((document) => document.toJS() as Partial<Manifest> | null)) {
        expect([typeof manifest?.apiVersion, typeof manifest?.kind], file).toEqual(['string', 'string'])
      }
    }
  })

  it('has a kustomization.yaml that lists every manifest of its folder and applies no Secret', () => {
    const [kustomization] = documents(FOLDER, 'kustomization.yaml') as Array<{ apiVersion: string, kind: string, resources: string[] }>
    expect([kustomization?.apiVersion, kustomization?.kind]).toEqual(['kustomize.config.k8s.io/v1beta1', 'Kustomization'])
    expect([...kustomization?.resources ?? []].sort()).toEqual(['cronjob.yaml', 'persistentvolumeclaim.yaml'])
    expect(applied(FOLDER).map((manifest) => manifest.kind).sort()).toEqual(['CronJob', 'PersistentVolumeClaim'])
  })

  it('labels every manifest as plantstore, and its pods so that nothing of the postgres setup selects them', () => {
    for (const manifest of applied(FOLDER)) {
      expect(manifest.metadata.labels?.['app.kubernetes.io/name'], manifest.kind).toBe('plantstore')
    }
    const labels = cronJob().spec.jobTemplate.spec.template.metadata.labels ?? {}
    expect(labels['app.kubernetes.io/name']).toBe('plantstore')
    expect(labels['app.kubernetes.io/component']).toBe('export')
    const selectors = [
      deployment().spec.selector.matchLabels,
      ...(deployment().spec.template.spec.topologySpreadConstraints ?? []).map((each) => each.labelSelector?.matchLabels ?? {}),
      ...postgres().filter((manifest) => manifest.kind === 'Service' || manifest.kind === 'PodDisruptionBudget')
        .map((manifest) => (manifest as Selecting).spec.selector)
        .map((selector) => 'matchLabels' in selector ? selector.matchLabels as Labels : selector)
    ]
    expect(selectors.length).toBe(5)
    for (const selector of selectors) expect(selects(selector, labels), JSON.stringify(selector)).toBe(false)
  })

  it('runs at 03:00 UTC, one Job at a time, retried twice within an hour, as the README says', () => {
    const { spec } = cronJob()
    const { backoffLimit, activeDeadlineSeconds } = spec.jobTemplate.spec
    expect(spec.schedule).toBe('0 3 * * *')
    expect(spec.timeZone).toBe('Etc/UTC')
    expect(spec.concurrencyPolicy).toBe('Forbid')
    expect(pod().restartPolicy).toBe('Never')
    const readme = readFileSync(README, 'utf8').replace(/\s+/g, ' ')
    for (const stated of [
      'every night at 03:00 UTC', `\`schedule: "${spec.schedule}"\``, `\`timeZone: ${spec.timeZone}\``,
      `\`concurrencyPolicy: ${spec.concurrencyPolicy}\``, `\`startingDeadlineSeconds: ${spec.startingDeadlineSeconds}\``,
      `\`backoffLimit: ${backoffLimit}\``, `\`activeDeadlineSeconds: ${activeDeadlineSeconds}\``,
      `the last ${spec.successfulJobsHistoryLimit} successful and ${spec.failedJobsHistoryLimit} failed Jobs`,
      `keeps the newest ${KEPT_EXPORTS} exports`, 'kubectl apply -k deploy/kubernetes/export'
    ]) {
      expect(readme).toContain(stated)
    }
    expect([spec.startingDeadlineSeconds, backoffLimit, activeDeadlineSeconds]).toEqual([3600, 2, 3600])
  })

  it('runs every step as the Deployment does: its image, its pod and container security contexts', () => {
    const server = deployment().spec.template.spec
    const serverContainer = containerOf(server, 'plantstore')
    expect(pod().automountServiceAccountToken).toBe(false)
    expect(pod().enableServiceLinks).toBe(false)
    // fsGroupChangePolicy only spares a recursive chown of the volume; the rest is the Deployment's.
    const { fsGroupChangePolicy, ...podContext } = pod().securityContext ?? {}
    expect(podContext).toEqual(server.securityContext)
    expect(fsGroupChangePolicy).toBe('OnRootMismatch')
    expect(pod().initContainers?.map((each) => each.name)).toEqual(['export'])
    expect(pod().containers.map((each) => each.name)).toEqual(['prune'])
    for (const step of [exportStep(), pruneStep()]) {
      expect(step.image, step.name).toBe(serverContainer.image)
      expect(step.securityContext, step.name).toEqual(serverContainer.securityContext)
    }
  })

  it('gives every step CPU and memory requests and a memory limit that holds the heap and /tmp', () => {
    for (const step of [exportStep(), pruneStep()]) {
      const { requests, limits } = step.resources ?? {}
      expect(typeof requests?.cpu, step.name).toBe('string')
      const limit = bytes(limits?.memory ?? '')
      expect(limit >= bytes(requests?.memory ?? ''), step.name).toBe(true)
      const heap = /--max-old-space-size=(\d+)/.exec(envValue(step, 'NODE_OPTIONS') ?? '')
      if (heap !== null) expect(Number(heap[1]) * 2 ** 20 <= limit / 2, step.name).toBe(true)
      const tmp = (step.volumeMounts ?? []).find((mount) => mount.mountPath === '/tmp')
      if (tmp !== undefined) expect(bytes(volumeOf(pod(), tmp.name).emptyDir?.sizeLimit ?? '') < limit / 8, step.name).toBe(true)
    }
    // A Node.js process needs more than a shell does: the export has the heap ceiling, in memory-backed /tmp.
    expect(envValue(exportStep(), 'NODE_OPTIONS')).toMatch(/--max-old-space-size=\d+/)
    expect(volumeOf(pod(), mountAt(exportStep(), '/tmp').name).emptyDir?.medium).toBe('Memory')
  })

  it('reads the database URL from the Secret file the postgres Deployment reads, with one connection', () => {
    const server = deployment().spec.template.spec
    const serverContainer = containerOf(server, 'plantstore')
    const path = envValue(serverContainer, 'DATABASE_URL_FILE') ?? ''
    expect(path).toBe('/run/secrets/plantstore-database/url')
    expect(envValue(exportStep(), 'DATABASE_URL_FILE')).toBe(path)
    const mount = mountAt(exportStep(), posix.dirname(path))
    expect(mount.readOnly).toBe(true)
    const serverVolume = volumeOf(server, mountAt(serverContainer, posix.dirname(path)).name)
    expect(volumeOf(pod(), mount.name).secret).toEqual(serverVolume.secret)
    expect(serverVolume.secret?.items).toEqual([{ key: 'url', path: 'url' }])
    expect(envValue(exportStep(), 'DATABASE_POOL_SIZE')).toBe('1')
    for (const step of [exportStep(), pruneStep()]) {
      expect(step.env?.filter((variable) => variable.valueFrom !== undefined) ?? [], step.name).toEqual([])
      expect(step.envFrom, step.name).toBe(undefined)
    }
    // The pruning needs no secret.
    expect(pruneStep().volumeMounts?.map((each) => each.mountPath)).toEqual([EXPORTS])
  })

  it('writes only to its own ReadWriteOnce claim at /exports (and the export to its in-memory /tmp)', () => {
    const claim = one<PersistentVolumeClaim>(applied(FOLDER), 'PersistentVolumeClaim')
    expect(claim.spec.accessModes).toEqual(['ReadWriteOnce'])
    const claimNames = (manifests: Manifest[]) => manifests.filter((manifest) => manifest.kind === 'PersistentVolumeClaim').map((manifest) => manifest.metadata.name)
    expect(claimNames(applied(new URL('sqlite/', KUBERNETES)))).not.toContain(claim.metadata.name)
    for (const step of [exportStep(), pruneStep()]) {
      const exports = mountAt(step, EXPORTS)
      expect(volumeOf(pod(), exports.name).persistentVolumeClaim, step.name).toEqual({ claimName: claim.metadata.name })
      const writable = (step.volumeMounts ?? []).filter((mount) => mount.readOnly !== true).map((mount) => mount.mountPath).sort()
      expect(writable, step.name).toEqual(step.name === 'export' ? [EXPORTS, '/tmp'] : [EXPORTS])
    }
  })

  it('exports with a valid `plantstore export` command line, into a dated file on the claim', () => {
    const words = exportWords('20260102T030000Z')
    expect(words.slice(0, 2)).toEqual(['exec', 'plantstore'])

    const invocation = parseCommandLine(words.slice(2))

    expect(invocation).toEqual({ command: 'export', out: `${EXPORTS}/plants-20260102T030000Z.ndjson`, force: false })
    expect(scriptOf(exportStep())).toContain(`${EXPORTS}/plants-${DATE_PLACEHOLDER}.ndjson`)
  })
})

describe('deploy/kubernetes/export, its steps run as written', () => {
  it('Given a PostgreSQL store, When the export step runs, Then plants-<UTC date-time>.ndjson holds its plants', async () => {
    const url = await createTestDatabase()
    const cwd = temporaryFolder()
    expect((await runCli(['import', '-'], { cwd, env: { DATABASE_URL: url }, stdin: PLANTS })).code).toBe(0)
    const exports = temporaryFolder()
    const secrets = temporaryFolder()
    const urlFile = join(secrets, envValue(exportStep(), 'DATABASE_URL_FILE') ?? '')
    mkdirSync(dirname(urlFile), { recursive: true })
    writeFileSync(urlFile, url)
    const before = Math.floor(Date.now() / 1000) * 1000

    const run = await runStep(exportStep(), { exports, secrets }, binFolder())

    const after = Date.now()
    const files = readdirSync(exports)
    expect(files.length).toBe(1)
    const [name = ''] = files
    const parts = EXPORT_NAME.exec(name)?.slice(1).map(Number) ?? []
    expect(parts.length, name).toBe(6)
    const [year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0] = parts
    const named = Date.UTC(year, month - 1, day, hour, minute, second)
    expect(named >= before && named <= after, `${name} between ${new Date(before).toISOString()} and ${new Date(after).toISOString()}`).toBe(true)
    expect({ code: run.code, stdout: run.stdout, stderr: run.stderr.replace(/\d+\.\d s/, 'T s') })
      .toEqual({ code: 0, stdout: '', stderr: `exported 3 plants to ${join(exports, name)} in T s\n` })
    expect(readFileSync(join(exports, name), 'utf8')).toBe(PLANTS)
  })

  it(`Given ${KEPT_EXPORTS + 2} exports and temporary files, When the pruning step runs, Then the newest ${KEPT_EXPORTS} and a fresh temporary file remain`, async () => {
    const exports = temporaryFolder()
    const days = Array.from({ length: KEPT_EXPORTS + 2 }, (_, index) => `202601${String(index + 1).padStart(2, '0')}T030000Z`)
    // Written in a shuffled order, so that only the names can tell the newest.
    for (const day of [...days].reverse()) writeFileSync(join(exports, `plants-${day}.ndjson`), `${day}\n`)
    const activeDeadline = cronJob().spec.jobTemplate.spec.activeDeadlineSeconds ?? 0
    const stale = '.plants-20260101T030000Z.ndjson.partial-7-0badf00d'
    const fresh = '.plants-20260116T030000Z.ndjson.partial-8-5eed5eed'
    writeFileSync(join(exports, stale), 'killed export\n')
    utimesSync(join(exports, stale), secondsAgo(activeDeadline + 120), secondsAgo(activeDeadline + 120))
    writeFileSync(join(exports, fresh), 'export being written\n')
    utimesSync(join(exports, fresh), secondsAgo(activeDeadline - 120), secondsAgo(activeDeadline - 120))
    writeFileSync(join(exports, 'notes.txt'), 'not an export\n')

    const run = await runStep(pruneStep(), { exports }, binFolder())

    expect(run).toEqual({ code: 0, stdout: '', stderr: '' })
    expect(readdirSync(exports).sort()).toEqual([fresh, 'notes.txt', ...days.slice(2).map((day) => `plants-${day}.ndjson`)].sort())
    expect(readFileSync(join(exports, `plants-${days.at(-1) ?? ''}.ndjson`), 'utf8')).toBe(`${days.at(-1) ?? ''}\n`)
  })

  it(`Given fewer than ${KEPT_EXPORTS} exports, When the pruning step runs, Then it removes none`, async () => {
    const exports = temporaryFolder()
    const names = ['plants-20260101T030000Z.ndjson', 'plants-20260102T030000Z.ndjson']
    for (const name of names) writeFileSync(join(exports, name), '')

    const run = await runStep(pruneStep(), { exports }, binFolder())

    expect(run).toEqual({ code: 0, stdout: '', stderr: '' })
    expect(readdirSync(exports).sort()).toEqual(names)
  })
})
