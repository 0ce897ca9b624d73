import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, posix } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { loadConfig } from '../../src/config.js'

/**
 * The Kubernetes manifests under deploy/kubernetes/: that they parse, that kustomize applies every one of
 * them (and none of the example Secrets), and the fields the service depends on: probes on the right
 * endpoints and port, the security context the image needs, secrets as read-only files, the writable
 * paths, the SQLite and PostgreSQL topologies, and that the service accepts the configuration a pod gets.
 */

const ROOT = new URL('../../deploy/kubernetes/', import.meta.url)
const SETUPS = ['postgres', 'sqlite'] as const
type Setup = typeof SETUPS[number]

/** The kinds `kubectl apply -k` creates for each setup: no Secret (those are created by hand). */
const APPLIED_KINDS: Record<Setup, string[]> = {
  postgres: ['Deployment', 'PodDisruptionBudget', 'Service'],
  sqlite: ['Deployment', 'PersistentVolumeClaim', 'Service']
}

/** The service's own graceful stop ends within this many seconds (docs/reference/server.md, "Stopping"). */
const DRAIN_SECONDS = 8
const PLACEHOLDER = 'change-me'

type Labels = Record<string, string>
interface Metadata { name: string, labels?: Labels }
interface Manifest { apiVersion: string, kind: string, metadata: Metadata }
interface HttpProbe {
  httpGet?: { path?: string, port?: string | number, scheme?: string }
  periodSeconds?: number
  timeoutSeconds?: number
  failureThreshold?: number
}
interface EnvVar { name: string, value?: string, valueFrom?: unknown }
interface VolumeMount { name: string, mountPath: string, readOnly?: boolean, subPath?: string }
interface Container {
  name: string
  image: string
  ports?: Array<{ name?: string, containerPort: number, protocol?: string }>
  env?: EnvVar[]
  envFrom?: unknown[]
  resources?: { requests?: Record<string, string>, limits?: Record<string, string> }
  securityContext?: {
    runAsUser?: number
    runAsNonRoot?: boolean
    readOnlyRootFilesystem?: boolean
    allowPrivilegeEscalation?: boolean
    privileged?: boolean
    capabilities?: { drop?: string[], add?: string[] }
  }
  startupProbe?: HttpProbe
  livenessProbe?: HttpProbe
  readinessProbe?: HttpProbe
  lifecycle?: { preStop?: { sleep?: { seconds: number } } }
  volumeMounts?: VolumeMount[]
}
interface Volume {
  name: string
  emptyDir?: { medium?: string, sizeLimit?: string }
  secret?: { secretName: string, items?: Array<{ key: string, path: string }>, defaultMode?: number }
  persistentVolumeClaim?: { claimName: string, readOnly?: boolean }
}
interface PodSpec {
  automountServiceAccountToken?: boolean
  enableServiceLinks?: boolean
  terminationGracePeriodSeconds?: number
  securityContext?: {
    runAsNonRoot?: boolean
    runAsUser?: number
    runAsGroup?: number
    fsGroup?: number
    seccompProfile?: { type: string }
  }
  topologySpreadConstraints?: Array<{ topologyKey: string, whenUnsatisfiable?: string, labelSelector?: { matchLabels?: Labels } }>
  initContainers?: Container[]
  containers: Container[]
  volumes?: Volume[]
}
interface Deployment extends Manifest {
  spec: {
    replicas: number
    strategy: { type: string, rollingUpdate?: { maxSurge?: number | string, maxUnavailable?: number | string } }
    selector: { matchLabels: Labels }
    template: { metadata: Metadata, spec: PodSpec }
  }
}
interface Service extends Manifest {
  spec: { type?: string, selector: Labels, ports: Array<{ name?: string, port: number, targetPort?: string | number, protocol?: string }> }
}
interface PersistentVolumeClaim extends Manifest { spec: { accessModes: string[], resources: { requests: { storage: string } } } }
interface PodDisruptionBudget extends Manifest { spec: { minAvailable?: number | string, maxUnavailable?: number | string, selector: { matchLabels: Labels } } }
interface Secret extends Manifest { stringData?: Record<string, string>, data?: Record<string, string> }
interface Kustomization { apiVersion: string, kind: string, resources: string[] }

const folder = (setup: Setup) => new URL(`${setup}/`, ROOT)
const yamlFiles = (setup: Setup) => readdirSync(folder(setup)).filter((name) => name.endsWith('.yaml')).sort()
const isExample = (file: string) => file.endsWith('.example.yaml')

function parse (setup: Setup, file: string): unknown[] {
  return parseAllDocuments(readFileSync(new URL(file, folder(setup)), 'utf8')).map((document) => document.toJS() as unknown)
}

function kustomization (setup: Setup): Kustomization {
  const [document] = parse(setup, 'kustomization.yaml')
  return document as Kustomization
}

/** What `kubectl apply -k` applies: every document of every resource kustomization.yaml lists. */
function applied (setup: Setup): Manifest[] {
  return kustomization(setup).resources.flatMap((file) => parse(setup, file) as Manifest[])
}

function one<T extends Manifest> (setup: Setup, kind: string): T {
  const found = applied(setup).filter((manifest) => manifest.kind === kind)
  expect(found.map((manifest) => manifest.kind)).toEqual([kind])
  return found[0] as T
}

function exampleSecrets (setup: Setup): Secret[] {
  return yamlFiles(setup).filter(isExample).flatMap((file) => parse(setup, file) as Secret[])
}

const deployment = (setup: Setup) => one<Deployment>(setup, 'Deployment')

function container (setup: Setup): Container {
  const containers = deployment(setup).spec.template.spec.containers
  expect(containers.map((each) => each.name)).toEqual(['plantstore'])
  return containers[0] as Container
}

function envValue (each: Container, name: string): string | undefined {
  const found = (each.env ?? []).filter((variable) => variable.name === name)
  expect(found.length).toBeLessThanOrEqual(1)
  return found[0]?.value
}

function volume (setup: Setup, name: string): Volume {
  const found = (deployment(setup).spec.template.spec.volumes ?? []).filter((each) => each.name === name)
  expect(found.map((each) => each.name)).toEqual([name])
  return found[0] as Volume
}

function mountAt (each: Container, mountPath: string): VolumeMount {
  const found = (each.volumeMounts ?? []).filter((mount) => mount.mountPath === mountPath)
  expect(found.map((mount) => mount.mountPath)).toEqual([mountPath])
  return found[0] as VolumeMount
}

/** The Secret and key behind the file `path`, which must lie on a read-only Secret volume (no subPath). */
function secretFile (setup: Setup, path: string): { secretName: string, key: string } {
  const mount = mountAt(container(setup), posix.dirname(path))
  expect(mount.readOnly).toBe(true)
  expect(mount.subPath).toBe(undefined)
  const secret = volume(setup, mount.name).secret
  expect(secret).toBeDefined()
  const items = secret?.items ?? []
  const item = items.find((each) => each.path === posix.basename(path))
  // Without items, every key of the Secret is a file of its name.
  return { secretName: secret?.secretName ?? '', key: items.length === 0 ? posix.basename(path) : item?.key ?? '' }
}

/** The labels of `labels` named in `selector`: equal to `selector` exactly when it selects them. */
const pick = (labels: Labels, selector: Labels): Labels =>
  Object.fromEntries(Object.keys(selector).map((key) => [key, labels[key] ?? '']))

function bytes (quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity)
  expect(match, `memory quantity ${quantity}`).not.toBe(null)
  const units: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }
  return Number(match?.[1]) * (units[match?.[2] ?? ''] ?? 1)
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

/** The instructions of the Dockerfile's final (runtime) stage, continuation lines joined. */
function runtimeStage (): Array<{ instruction: string, args: string }> {
  const text = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8')
  const instructions = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^(\S+)\s*(.*)$/.exec(line)
      return { instruction: (match?.[1] ?? '').toUpperCase(), args: match?.[2] ?? '' }
    })
  return instructions.slice(instructions.findLastIndex((each) => each.instruction === 'FROM'))
}

/** The environment the image itself sets (ENV in the runtime stage); a pod's env overrides it. */
function imageEnv (): Record<string, string> {
  const env: Record<string, string> = {}
  for (const { args } of runtimeStage().filter((each) => each.instruction === 'ENV')) {
    const words = args.split(/\s+/)
    if (!(words[0] ?? '').includes('=')) {
      env[words[0] ?? ''] = words.slice(1).join(' ')
      continue
    }
    for (const word of words) {
      const at = word.indexOf('=')
      env[word.slice(0, at)] = word.slice(at + 1)
    }
  }
  return env
}

describe('deploy/kubernetes', () => {
  it('has exactly the sqlite and postgres setups, and the export add-on (test/deploy/export-cronjob.test.ts)', () => {
    const folders = readdirSync(ROOT).filter((name) => statSync(new URL(name, ROOT)).isDirectory()).sort()
    expect(folders).toEqual(['export', ...SETUPS])
  })

  it('runs the image as its node user (uid 1000), which the manifests name as runAsUser', () => {
    const users = runtimeStage().filter((each) => each.instruction === 'USER').map((each) => each.args)
    expect(users).toEqual(['node'])
    expect(runtimeStage().filter((each) => each.instruction === 'EXPOSE').map((each) => each.args)).toEqual(['3000 9464'])
    for (const setup of SETUPS) {
      expect(deployment(setup).spec.template.spec.securityContext?.runAsUser).toBe(1000)
    }
  })
})

describe.each(SETUPS)('deploy/kubernetes/%s', (setup) => {
  it('has YAML files that parse without errors or warnings', () => {
    const files = yamlFiles(setup)
    expect(files).toContain('kustomization.yaml')
    for (const file of files) {
      const documents = parseAllDocuments(readFileSync(new URL(file, folder(setup)), 'utf8'))
      expect(documents.length > 0, file).toBe(true)
      const problems = documents.flatMap((document) => [...document.errors, ...document.warnings].map(String))
      expect(problems, file).toEqual([])
      for (const document of documents) {
        const manifest = document.toJS() as Partial<Manifest> | null
        expect(typeof manifest?.apiVersion, file).toBe('string')
        expect(typeof manifest?.kind, file).toBe('string')
      }
    }
  })

  it('has a kustomization.yaml that lists every manifest of its folder, and none of the example Secrets', () => {
    const { apiVersion, kind, resources } = kustomization(setup)
    expect([apiVersion, kind]).toEqual(['kustomize.config.k8s.io/v1beta1', 'Kustomization'])
    expect([...resources].sort()).toEqual(yamlFiles(setup).filter((file) => file !== 'kustomization.yaml' && !isExample(file)))
    expect(new Set(resources).size).toBe(resources.length)
    expect(applied(setup).map((manifest) => manifest.kind).sort()).toEqual(APPLIED_KINDS[setup])
    // Applying an example would overwrite the Secret an operator created with its placeholder.
    expect(yamlFiles(setup).filter(isExample).length).toBeGreaterThan(0)
    expect(exampleSecrets(setup).map((manifest) => manifest.kind)).toEqual(exampleSecrets(setup).map(() => 'Secret'))
  })

  it('labels every manifest as plantstore', () => {
    for (const manifest of [...applied(setup), ...exampleSecrets(setup)]) {
      expect(manifest.metadata.labels?.['app.kubernetes.io/name'], `${manifest.kind} ${manifest.metadata.name}`).toBe('plantstore')
    }
  })

  it('runs the image on port 3000, named http, and metrics on 9464, listening on every address', () => {
    const plantstore = container(setup)
    expect(plantstore.image).toBe('plantstore:1.9.0')
    expect(plantstore.ports).toEqual([{ name: 'http', containerPort: 3000, protocol: 'TCP' }, { name: 'metrics', containerPort: 9464, protocol: 'TCP' }])
    expect(envValue(plantstore, 'PORT')).toBe('3000')
    expect(envValue(plantstore, 'METRICS_PORT')).toBe('9464')
    expect(envValue(plantstore, 'HOST')).toBe('0.0.0.0')
  })

  it('probes liveness on /healthz and readiness on /readyz, on the port named http', () => {
    const { startupProbe, livenessProbe, readinessProbe } = container(setup)
    expect(livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' })
    expect(readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' })
    expect(startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' })
    for (const probe of [startupProbe, livenessProbe, readinessProbe]) {
      // An answer that takes as long as the period would overlap the next probe.
      expect((probe?.timeoutSeconds ?? 1) < (probe?.periodSeconds ?? 10)).toBe(true)
    }
    // Start-up (opening the store, migrations) gets at least 30 s; so does a stall before a restart.
    expect((startupProbe?.periodSeconds ?? 10) * (startupProbe?.failureThreshold ?? 3) >= 30).toBe(true)
    expect((livenessProbe?.periodSeconds ?? 10) * (livenessProbe?.failureThreshold ?? 3) >= 30).toBe(true)
  })

  it('runs as the non-root uid 1000 with a read-only root, no privilege escalation and no capabilities', () => {
    const pod = deployment(setup).spec.template.spec
    expect(pod.securityContext?.runAsNonRoot).toBe(true)
    expect(pod.securityContext?.runAsUser).toBe(1000)
    expect(pod.securityContext?.runAsGroup).toBe(1000)
    expect(pod.securityContext?.fsGroup).toBe(1000)
    expect(pod.securityContext?.seccompProfile).toEqual({ type: 'RuntimeDefault' })
    expect(pod.automountServiceAccountToken).toBe(false)
    expect(pod.enableServiceLinks).toBe(false)
    for (const each of [...(pod.initContainers ?? []), ...pod.containers]) {
      expect(each.securityContext?.readOnlyRootFilesystem).toBe(true)
      expect(each.securityContext?.allowPrivilegeEscalation).toBe(false)
      expect(each.securityContext?.capabilities?.drop).toEqual(['ALL'])
      expect(each.securityContext?.capabilities?.add).toBe(undefined)
      expect(each.securityContext?.privileged ?? false).toBe(false)
      // A container-level user would override the pod's.
      expect(each.securityContext?.runAsUser ?? 1000).toBe(1000)
    }
  })

  it('gives every container CPU and memory requests and a memory limit that holds the heap and /tmp', () => {
    const pod = deployment(setup).spec.template.spec
    for (const each of [...(pod.initContainers ?? []), ...pod.containers]) {
      const { requests, limits } = each.resources ?? {}
      expect(typeof requests?.cpu).toBe('string')
      expect(typeof requests?.memory).toBe('string')
      expect(typeof limits?.memory).toBe('string')
      const limit = bytes(limits?.memory ?? '')
      expect(limit >= bytes(requests?.memory ?? '')).toBe(true)
      // The in-memory /tmp is charged to the container's memory, and V8's old space must fit below the limit.
      expect(bytes(volume(setup, mountAt(each, '/tmp').name).emptyDir?.sizeLimit ?? '') < limit / 8).toBe(true)
      const heap = /--max-old-space-size=(\d+)/.exec(envValue(each, 'NODE_OPTIONS') ?? '')
      if (heap !== null) expect(Number(heap[1]) * 2 ** 20 <= limit / 2).toBe(true)
    }
  })

  it('writes only to an in-memory /tmp (and, for SQLite, /data)', () => {
    const plantstore = container(setup)
    const tmp = mountAt(plantstore, '/tmp')
    expect(tmp.readOnly ?? false).toBe(false)
    const { emptyDir } = volume(setup, tmp.name)
    expect(emptyDir?.medium).toBe('Memory')
    expect(typeof emptyDir?.sizeLimit).toBe('string')
    const writable = (plantstore.volumeMounts ?? []).filter((mount) => mount.readOnly !== true).map((mount) => mount.mountPath).sort()
    expect(writable).toEqual(setup === 'sqlite' ? ['/data', '/tmp'] : ['/tmp'])
  })

  it('reads the tokens from a read-only Secret volume, and no env var holds a secret', () => {
    const plantstore = container(setup)
    expect(envValue(plantstore, 'PLANTSTORE_TOKENS_FILE')).toBe('/run/secrets/plantstore/tokens')
    expect(secretFile(setup, '/run/secrets/plantstore/tokens')).toEqual({ secretName: 'plantstore-tokens', key: 'tokens' })
    expect(volume(setup, mountAt(plantstore, '/run/secrets/plantstore').name).secret?.defaultMode).toBe(0o440)
    const env = plantstore.env ?? []
    expect(env.map((variable) => variable.name)).not.toContain('PLANTSTORE_TOKENS')
    // Only literal values: no secretKeyRef (it would put the secret in the environment), no envFrom.
    expect(env.filter((variable) => variable.valueFrom !== undefined)).toEqual([])
    expect(plantstore.envFrom).toBe(undefined)
    for (const { name, value } of env) {
      expect(/sha256:[0-9a-f]{64}|pst_|:\/\/[^/@\s]*:[^/@\s]*@/i.test(value ?? ''), name).toBe(false)
    }
  })

  it('has example Secrets with placeholders only, for every Secret the pods mount', () => {
    const mounted = (deployment(setup).spec.template.spec.volumes ?? []).flatMap((each) => each.secret === undefined ? [] : [each.secret.secretName])
    expect(exampleSecrets(setup).map((secret) => secret.metadata.name).sort()).toEqual([...mounted].sort())
    for (const secret of exampleSecrets(setup)) {
      expect(secret.data).toBe(undefined)
      if (secret.metadata.name === 'plantstore-tokens') {
        const entries = (secret.stringData?.['tokens'] ?? '').split('\n').map((line) => line.trim())
          .filter((line) => line !== '' && !line.startsWith('#'))
        expect(entries).toEqual([`sha256:${sha256(PLACEHOLDER)}`])
      } else {
        expect(secret.metadata.name).toBe('plantstore-database')
        expect(new URL(secret.stringData?.['url'] ?? '').password).toBe(PLACEHOLDER)
      }
    }
  })

  it('gives the pod a configuration the service accepts', () => {
    // The image's ENV, overridden by the pod's env, with each *_FILE read from the example Secret's file.
    const folderForFiles = mkdtempSync(join(tmpdir(), 'plantstore-kubernetes-'))
    try {
      const env = imageEnv()
      for (const { name, value } of container(setup).env ?? []) env[name] = value ?? ''
      for (const name of Object.keys(env).filter((each) => each.endsWith('_FILE'))) {
        const { secretName, key } = secretFile(setup, env[name] ?? '')
        const example = exampleSecrets(setup).find((secret) => secret.metadata.name === secretName)
        const file = join(folderForFiles, env[name] ?? '')
        mkdirSync(join(file, '..'), { recursive: true })
        writeFileSync(file, example?.stringData?.[key] ?? '')
        env[name] = file
      }
      const config = loadConfig(env, false)
      expect(config.port).toBe(3000)
      expect(config.host).toBe('0.0.0.0')
      expect(config.tokens.map((token) => token.digest)).toEqual([Buffer.from(sha256(PLACEHOLDER), 'hex')])
      expect(config.databaseUrl).toBe(setup === 'sqlite'
        ? 'sqlite:/data/plantstore.db'
        : `postgres://plantstore:${PLACEHOLDER}@postgres.example.internal:5432/plantstore?sslmode=require`)
    } finally {
      rmSync(folderForFiles, { recursive: true, force: true })
    }
  })

  it('gives the graceful stop (and a preStop sleep, which must be the kubelet\'s own) time to finish', () => {
    const pod = deployment(setup).spec.template.spec
    const preStop = container(setup).lifecycle?.preStop
    // The image promises no shell, so no exec hook: only the kubelet's sleep action (Kubernetes 1.30+).
    if (preStop !== undefined) expect(Object.keys(preStop)).toEqual(['sleep'])
    const sleep = preStop?.sleep?.seconds ?? 0
    expect((pod.terminationGracePeriodSeconds ?? 30) >= sleep + DRAIN_SECONDS + 2).toBe(true)
  })

  it('has a ClusterIP Service on port 80 that selects the pods and targets the port named http', () => {
    const { spec } = deployment(setup)
    const podLabels = spec.template.metadata.labels ?? {}
    expect(pick(podLabels, spec.selector.matchLabels)).toEqual(spec.selector.matchLabels)
    const service = one<Service>(setup, 'Service')
    expect(service.spec.type).toBe('ClusterIP')
    expect(service.spec.selector).toEqual(spec.selector.matchLabels)
    expect(pick(podLabels, service.spec.selector)).toEqual(service.spec.selector)
    expect(service.spec.ports).toEqual([{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP', appProtocol: 'http' }])
  })
})

describe('deploy/kubernetes/sqlite', () => {
  const setup = 'sqlite'

  it('runs one pod, and stops the old pod before it starts a new one', () => {
    const { spec } = deployment(setup)
    expect(spec.replicas).toBe(1)
    expect(spec.strategy).toEqual({ type: 'Recreate' })
  })

  it('keeps the database file on the folder\'s ReadWriteOnce volume at /data', () => {
    const claim = one<PersistentVolumeClaim>(setup, 'PersistentVolumeClaim')
    expect(claim.spec.accessModes).toEqual(['ReadWriteOnce'])
    const plantstore = container(setup)
    const data = mountAt(plantstore, '/data')
    expect(data.readOnly ?? false).toBe(false)
    expect(volume(setup, data.name).persistentVolumeClaim).toEqual({ claimName: claim.metadata.name })
    expect(envValue(plantstore, 'DATABASE_URL')).toBe('sqlite:/data/plantstore.db')
  })
})

describe('deploy/kubernetes/postgres', () => {
  const setup = 'postgres'

  it('runs two pods, replaced one at a time without losing one, spread over nodes', () => {
    const { spec } = deployment(setup)
    expect(spec.replicas).toBe(2)
    expect(spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } })
    const byNode = (spec.template.spec.topologySpreadConstraints ?? []).filter((each) => each.topologyKey === 'kubernetes.io/hostname')
    expect(byNode.map((each) => each.labelSelector?.matchLabels)).toEqual([spec.selector.matchLabels])
  })

  it('reads the database URL from the Secret plantstore-database, which replaces the image\'s SQLite default', () => {
    const plantstore = container(setup)
    expect(envValue(plantstore, 'DATABASE_URL_FILE')).toBe('/run/secrets/plantstore-database/url')
    expect(secretFile(setup, '/run/secrets/plantstore-database/url')).toEqual({ secretName: 'plantstore-database', key: 'url' })
    // The image sets DATABASE_URL; the service takes DATABASE_URL_FILE over it.
    expect(imageEnv()['DATABASE_URL']).toBe('sqlite:/data/plantstore.db')
    expect(envValue(plantstore, 'DATABASE_URL')).toBeUndefined()
  })

  it('keeps nothing in the pod: no persistent volume', () => {
    const volumes = deployment(setup).spec.template.spec.volumes ?? []
    expect(volumes.filter((each) => each.emptyDir === undefined && each.secret === undefined)).toEqual([])
  })

  it('keeps the connections of all pods, during a rollout too, below PostgreSQL\'s default max_connections', () => {
    const { spec } = deployment(setup)
    const pods = spec.replicas + Number(spec.strategy.rollingUpdate?.maxSurge ?? 0)
    expect(pods * Number(envValue(container(setup), 'DATABASE_POOL_SIZE') ?? 10) < 100).toBe(true)
  })

  it('has a PodDisruptionBudget that keeps one of the Deployment\'s pods up', () => {
    const { spec } = deployment(setup)
    const budget = one<PodDisruptionBudget>(setup, 'PodDisruptionBudget')
    expect(budget.apiVersion).toBe('policy/v1')
    expect(budget.spec.minAvailable).toBe(1)
    expect(budget.spec.maxUnavailable).toBe(undefined)
    expect(budget.spec.selector.matchLabels).toEqual(spec.selector.matchLabels)
    expect(pick(spec.template.metadata.labels ?? {}, budget.spec.selector.matchLabels)).toEqual(budget.spec.selector.matchLabels)
  })
})
