import { existsSync, readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { jwtSettingsVariables, type JwtSettings } from './auth/jwt/jwt-settings.js'
import { parseTokenList, type ConfiguredToken } from './auth/tokens.js'
import { isPostgresUrl } from './store/open-store.js'
import { DATABASE_POOLING_MODES, type DatabasePooling } from './store/postgres/pooling.js'
import { secretsKeyOf } from './webhooks/secrets.js'
import { booleanVariable, ConfigError, durationVariable, integerVariable, valueOf, type Env } from './config-variables.js'

export { ConfigError } from './config-variables.js'

/**
 * Configuration comes from environment variables only, and this is the only module that reads them.
 * Every variable is validated at start-up; each bad one is reported on a line naming it, all at once.
 */

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = typeof LOG_LEVELS[number]
export type OtlpProtocol = 'http/protobuf' | 'http/json'

export interface Config {
  readonly port: number
  readonly host: string
  readonly databaseUrl: string
  /** PostgreSQL only: pool size per instance, connect timeout, statement timeout, what pools in front (`DATABASE_POOLING`). */
  readonly database: {
    readonly poolSize: number
    readonly connectTimeoutMs: number
    readonly statementTimeoutMs: number
    readonly pooling: DatabasePooling
  }
  /** The tokens of `PLANTSTORE_TOKENS` (or its file), as digests; empty means "the store's tokens only". */
  readonly tokens: readonly ConfiguredToken[]
  /** JWT access tokens from the organisation's identity provider (`AUTH_JWT_*`); undefined: off. */
  readonly jwt: JwtSettings | undefined
  readonly logLevel: LogLevel
  readonly bodyLimit: number
  /** BATCH_BODY_LIMIT: the body limit of `POST /plants/batch`. */
  readonly batchBodyLimit: number
  /** Requests per minute per token on /plants; 0 turns per-token rate limiting off. */
  readonly rateLimitPerMinute: number
  /** Failed authentications (401s) per minute from one client address before it gets 429s; 0 turns this off. */
  readonly authFailureLimitPerMinute: number
  /** Event-loop delay above which requests are shed with 503; 0 turns load shedding off. */
  readonly maxEventLoopDelayMs: number
  /** Requests answered at once above which new ones are shed with 503; 0 turns this limit off. */
  readonly maxInFlightRequests: number
  /** Human-readable logs (pino-pretty) when standard output is a terminal; JSON lines otherwise. */
  readonly prettyLogs: boolean
  readonly webhooks: WebhookConfig
  /** The admin listener's port for `GET /metrics` (same host); 0 turns metrics off. */
  readonly metricsPort: number
  /** Whether traces are exported: an OTLP endpoint is set (the OpenTelemetry SDK reads its own `OTEL_*` variables). */
  readonly tracing: boolean
  /** How spans are encoded for the OTLP endpoint (the exporters do not read OTEL_EXPORTER_OTLP_PROTOCOL themselves). */
  readonly otlpProtocol: OtlpProtocol
  /** Origins allowed to call the API from a browser: `'*'`, a list, or empty for CORS off. */
  readonly corsOrigins: '*' | readonly string[]
  /** Fastify's `trustProxy`: whom to believe about the client's address and protocol (`X-Forwarded-*`). */
  readonly trustProxy: boolean | string
  readonly changes: ChangesConfig
}

export interface ChangesConfig {
  /** CHANGES_RETENTION: how long a change is kept and served. */
  readonly retentionMs: number
  /** CHANGES_STREAMS_MAX: the most change streams open at once on one instance. */
  readonly streamsMax: number
}

export const DEFAULT_CHANGES_CONFIG: ChangesConfig = Object.freeze({ retentionMs: 30 * 24 * 3600_000, streamsMax: 1000 })

export interface WebhookConfig {
  /**
   * Whether this instance delivers events. Off, it still records them (every instance does, in its
   * writes' transactions) and leaves their delivery to the instances on the same database that deliver.
   */
  readonly deliver: boolean
  /** Whether webhook URLs may reach loopback, private and link-local addresses. */
  readonly allowPrivateNetworks: boolean
  /** The AES-256 key that seals signing secrets at rest; absent: they are stored as they are. */
  readonly secretsKey: Buffer | undefined
  /** Keys that sealed secrets before `secretsKey` replaced them: they open those secrets, never seal new ones. */
  readonly previousSecretsKeys: readonly Buffer[]
  readonly concurrency: number
  /** The most deliveries of one subscription under way at once per instance (its share of `concurrency`). */
  readonly concurrencyPerSubscription: number
  readonly firstRetryMs: number
  readonly maxRetryMs: number
  readonly retryForMs: number
  readonly leaseMs: number
}

/** The webhook settings when no variable is set. */
export const DEFAULT_WEBHOOK_CONFIG: WebhookConfig = Object.freeze({
  deliver: true,
  allowPrivateNetworks: false,
  secretsKey: undefined,
  previousSecretsKeys: [],
  concurrency: 32,
  concurrencyPerSubscription: 16,
  firstRetryMs: 5000,
  maxRetryMs: 3600_000,
  retryForMs: 24 * 3600_000,
  leaseMs: 30_000
})

/** Every bad variable of one start, so an operator fixes them all in one go. */
export class InvalidConfigError extends AggregateError {
  declare readonly errors: ConfigError[]

  constructor (errors: ConfigError[]) {
    super(errors, errors.map((error) => error.message).join('; '))
    this.name = 'InvalidConfigError'
  }
}

/**
 * Loads `file` (default `.env` in the working directory) into `process.env` when it exists, with Node's
 * own parser. A variable already in the environment wins over the file, as with `node --env-file`.
 */
export function loadDotEnvFile (file = '.env'): boolean {
  if (!existsSync(file)) return false
  process.loadEnvFile(file)
  return true
}

export function loadConfig (env: Env = process.env, stdoutIsTty = process.stdout.isTTY === true): Config {
  const errors: ConfigError[] = []
  const read = <T>(variable: () => T, fallback: T): T => {
    try {
      return variable()
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error
      errors.push(error)
      return fallback
    }
  }
  const tracing = read(() => tracingVariable(env), false)
  const webhookConcurrency = read(() => integerVariable(env, 'WEBHOOK_CONCURRENCY', DEFAULT_WEBHOOK_CONFIG.concurrency, 1, 1024), 0)
  const config: Config = Object.freeze({
    port: read(() => integerVariable(env, 'PORT', 3000, 0, 65535), 0),
    host: read(() => hostVariable(env), ''),
    databaseUrl: read(() => databaseUrlVariable(env), ''),
    database: Object.freeze({
      poolSize: read(() => integerVariable(env, 'DATABASE_POOL_SIZE', 10, 1, 1000), 0),
      connectTimeoutMs: read(() => integerVariable(env, 'DATABASE_CONNECT_TIMEOUT_MS', 2000, 100, 600_000), 0),
      statementTimeoutMs: read(() => integerVariable(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 5000, 100, 600_000), 0),
      pooling: read(() => databasePoolingVariable(env), 'direct')
    }),
    tokens: Object.freeze(read(() => tokensVariable(env), [])),
    jwt: jwtSettingsVariables(env, read),
    logLevel: read(() => logLevelVariable(env), 'info'),
    bodyLimit: read(() => integerVariable(env, 'BODY_LIMIT', 16384, 1, 64 * 1024 * 1024), 0),
    batchBodyLimit: read(() => integerVariable(env, 'BATCH_BODY_LIMIT', 1024 * 1024, 1, 64 * 1024 * 1024), 0),
    rateLimitPerMinute: read(() => integerVariable(env, 'RATE_LIMIT_PER_MINUTE', 0, 0, 10_000_000), 0),
    authFailureLimitPerMinute: read(() => integerVariable(env, 'AUTH_FAILURE_LIMIT_PER_MINUTE', 100, 0, 10_000_000), 0),
    maxEventLoopDelayMs: read(() => integerVariable(env, 'SHED_EVENT_LOOP_DELAY_MS', 200, 0, 60_000), 0),
    maxInFlightRequests: read(() => integerVariable(env, 'SHED_IN_FLIGHT_REQUESTS', 512, 0, 1_000_000), 0),
    prettyLogs: stdoutIsTty,
    webhooks: Object.freeze({
      deliver: read(() => booleanVariable(env, 'WEBHOOK_DELIVERY', true), true),
      allowPrivateNetworks: read(() => booleanVariable(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false), false),
      secretsKey: read(() => secretsKeyVariable(env), undefined),
      previousSecretsKeys: Object.freeze(read(() => previousSecretsKeysVariable(env), [])),
      concurrency: webhookConcurrency,
      concurrencyPerSubscription: read(() => integerVariable(env, 'WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION',
        defaultShareOf(webhookConcurrency), 1, 1024), 0),
      firstRetryMs: read(() => integerVariable(env, 'WEBHOOK_RETRY_FIRST_MS', DEFAULT_WEBHOOK_CONFIG.firstRetryMs, 100, 3600_000), 0),
      maxRetryMs: read(() => integerVariable(env, 'WEBHOOK_RETRY_MAX_MS', DEFAULT_WEBHOOK_CONFIG.maxRetryMs, 100, 24 * 3600_000), 0),
      retryForMs: read(() => integerVariable(env, 'WEBHOOK_RETRY_FOR_MS', DEFAULT_WEBHOOK_CONFIG.retryForMs, 1000, 30 * 24 * 3600_000), 0),
      // Longer than a delivery may take (10 s), so a lease never runs out while its attempt is under way.
      leaseMs: read(() => integerVariable(env, 'WEBHOOK_LEASE_MS', DEFAULT_WEBHOOK_CONFIG.leaseMs, 11_000, 3600_000), 0)
    }),
    metricsPort: read(() => integerVariable(env, 'METRICS_PORT', 9464, 0, 65535), 0),
    tracing,
    // Judged only when spans go out: with tracing off the OTEL_* variables may hold anything.
    otlpProtocol: tracing ? read(() => otlpProtocolVariable(env), 'http/protobuf') : 'http/protobuf',
    corsOrigins: Object.freeze(read(() => corsOriginsVariable(env), [])),
    trustProxy: read(() => trustProxyVariable(env), false),
    changes: Object.freeze({
      retentionMs: read(() => durationVariable(env, 'CHANGES_RETENTION', DEFAULT_CHANGES_CONFIG.retentionMs), 0),
      streamsMax: read(() => integerVariable(env, 'CHANGES_STREAMS_MAX', DEFAULT_CHANGES_CONFIG.streamsMax, 0, 100_000), 0)
    })
  })
  if (config.metricsPort !== 0 && config.metricsPort === config.port) {
    errors.push(new ConfigError('METRICS_PORT', `must differ from PORT (${config.port}): /metrics has a listener of its own; 0 turns it off`))
  }
  if (errors.length > 0) throw new InvalidConfigError(errors)
  return config
}

/**
 * A secret's value from the file `name_FILE` names (as Docker and Kubernetes secrets provide them), else
 * from `name`. The file wins when both are set, since an image sets `DATABASE_URL` to its SQLite default.
 * Whitespace around a file's contents (its final newline) is not part of it.
 */
function secretOf (env: Env, name: string, emptyFile: 'refused' | 'allowed' = 'refused'): string | undefined {
  const fileVariable = `${name}_FILE`
  const file = valueOf(env, fileVariable)
  if (file === undefined) return valueOf(env, name)
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable'
    throw new ConfigError(fileVariable, `names ${JSON.stringify(file)}, which cannot be read (${reason})`)
  }
  const value = text.trim()
  if (value === '' && emptyFile === 'refused') throw new ConfigError(fileVariable, `names ${JSON.stringify(file)}, which is empty`)
  return value
}

/** A subscription's default share of the delivery slots: half of them, so one silent receiver leaves the others half. */
function defaultShareOf (concurrency: number): number {
  return Math.max(1, Math.floor(concurrency / 2))
}

/** `WEBHOOK_SECRETS_KEY` (or its file): 32 random bytes as 64 hexadecimal digits or base64. Never echoed. */
function secretsKeyVariable (env: Env): Buffer | undefined {
  const text = secretOf(env, 'WEBHOOK_SECRETS_KEY')
  if (text === undefined) return undefined
  const key = secretsKeyOf(text)
  if (key === undefined) {
    throw new ConfigError(valueOf(env, 'WEBHOOK_SECRETS_KEY_FILE') === undefined ? 'WEBHOOK_SECRETS_KEY' : 'WEBHOOK_SECRETS_KEY_FILE',
      'must hold 32 bytes as 64 hexadecimal digits or as base64 (openssl rand -base64 32)')
  }
  return key
}

/**
 * `WEBHOOK_SECRETS_PREVIOUS_KEYS` (or its file): comma-separated keys in WEBHOOK_SECRETS_KEY's forms (a
 * file may put one per line), the keys replaced by it. Only with a current key: taking the key away
 * (storing secrets readable again) is not supported.
 */
function previousSecretsKeysVariable (env: Env): Buffer[] {
  const text = secretOf(env, 'WEBHOOK_SECRETS_PREVIOUS_KEYS')
  if (text === undefined) return []
  const variable = valueOf(env, 'WEBHOOK_SECRETS_PREVIOUS_KEYS_FILE') === undefined ? 'WEBHOOK_SECRETS_PREVIOUS_KEYS' : 'WEBHOOK_SECRETS_PREVIOUS_KEYS_FILE'
  if (valueOf(env, 'WEBHOOK_SECRETS_KEY') === undefined && valueOf(env, 'WEBHOOK_SECRETS_KEY_FILE') === undefined) {
    throw new ConfigError(variable, 'needs WEBHOOK_SECRETS_KEY: secrets are sealed with the current key, and going back to no key is not supported')
  }
  const entries = text.split(/[,\s]+/).filter((entry) => entry !== '')
  return entries.map((entry, index) => {
    const key = secretsKeyOf(entry)
    if (key === undefined) {
      throw new ConfigError(variable, `must hold comma-separated keys of 32 bytes as 64 hexadecimal digits or as base64; entry ${index + 1} is not one`)
    }
    return key
  })
}

/** Traces go out when an OTLP endpoint is set, unless the standard `OTEL_SDK_DISABLED` or `OTEL_TRACES_EXPORTER=none` says not to. */
function tracingVariable (env: Env): boolean {
  const endpoint = valueOf(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? valueOf(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  if (endpoint === undefined) return false
  if (!URL.canParse(endpoint) || !/^https?:$/.test(new URL(endpoint).protocol)) {
    const variable = valueOf(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') === undefined ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    throw new ConfigError(variable, `must be an http or https URL (OTLP over HTTP), got ${JSON.stringify(endpoint)}`)
  }
  if (valueOf(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return false
  // A comma-separated list, its values case-insensitive (the OpenTelemetry specification's rules).
  const exporters = (valueOf(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp').toLowerCase().split(',').map((name) => name.trim())
  return !exporters.includes('none')
}

/** `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`: the specification's default, or JSON. gRPC is not shipped. */
function otlpProtocolVariable (env: Env): OtlpProtocol {
  const variable = valueOf(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') === undefined ? 'OTEL_EXPORTER_OTLP_PROTOCOL' : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
  const value = valueOf(env, variable) ?? 'http/protobuf'
  if (value === 'http/protobuf' || value === 'http/json') return value
  throw new ConfigError(variable, `must be "http/protobuf" or "http/json" (gRPC is not supported), got ${JSON.stringify(value)}`)
}

/** `CORS_ORIGINS`: `*`, or comma-separated origins such as `https://app.example.com` (scheme, host, port; no path). */
function corsOriginsVariable (env: Env): '*' | string[] {
  const text = valueOf(env, 'CORS_ORIGINS')
  if (text === undefined) return []
  if (text.trim() === '*') return '*'
  const origins = text.split(',').map((origin) => origin.trim()).filter((origin) => origin !== '')
  for (const origin of origins) {
    if (!URL.canParse(origin) || new URL(origin).origin !== origin) {
      throw new ConfigError('CORS_ORIGINS', `must be "*" or comma-separated origins like https://app.example.com (no path or trailing slash), got ${JSON.stringify(origin)}`)
    }
  }
  if (origins.length === 0) throw new ConfigError('CORS_ORIGINS', 'must name at least one origin, or "*"')
  return origins
}

/**
 * `TRUST_PROXY`: `false` (the default: the peer is the client), `true` (trust every proxy: only when
 * nothing can reach the service but the proxy), or comma-separated proxy addresses/CIDRs. No hop count:
 * Fastify 5 trusts nothing for one (it cannot tell a proxy from a client writing X-Forwarded-For itself).
 */
function trustProxyVariable (env: Env): boolean | string {
  const text = valueOf(env, 'TRUST_PROXY')
  if (text === undefined || text === 'false') return false
  if (text === 'true') return true
  const entries = text.split(',').map((entry) => entry.trim())
  if (entries.every(isProxyAddress)) {
    return entries.join(',')
  }
  throw new ConfigError('TRUST_PROXY', `must be "true", "false", or comma-separated proxy addresses or CIDRs (or loopback, linklocal, uniquelocal), got ${JSON.stringify(text)}`)
}

/** An address, a CIDR, or one of proxy-addr's names for ranges. */
function isProxyAddress (entry: string): boolean {
  if (entry === 'loopback' || entry === 'linklocal' || entry === 'uniquelocal') return true
  const [address = '', prefix, extra] = entry.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined) return false
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))
}

/** `DATABASE_POOLING`: what stands between the service and PostgreSQL (src/store/postgres/pool.ts). */
function databasePoolingVariable (env: Env): DatabasePooling {
  const text = valueOf(env, 'DATABASE_POOLING') ?? 'direct'
  const mode = DATABASE_POOLING_MODES.find((candidate) => candidate === text)
  if (mode !== undefined) return mode
  throw new ConfigError('DATABASE_POOLING', `must be "direct", "session" or "transaction" (PgBouncer's pool_mode), got ${JSON.stringify(text)}`)
}

function hostVariable (env: Env): string {
  const host = valueOf(env, 'HOST') ?? '127.0.0.1'
  if (!/^[\w.:-]+$/.test(host)) {
    throw new ConfigError('HOST', `must be a host name or IP address, got ${JSON.stringify(host)}`)
  }
  return host
}

/** libpq's multi-host URL (`postgres://h1,h2/db`, `?host=h1,h2`, `target_session_attrs=`): node-postgres takes `h1,h2` for one host name. */
const POSTGRES_HOST_LIST = /^[^:]+:\/\/(?:[^/?#@]*@)?[^/?#]*,|[?&](?:host=[^&]*,|target_session_attrs=)/

function databaseUrlVariable (env: Env): string {
  const url = secretOf(env, 'DATABASE_URL') ?? 'sqlite:./data/plantstore.db'
  if (url === 'memory:' || (url.startsWith('sqlite:') && url.length > 'sqlite:'.length)) return url
  // The value is not echoed: a connection URL may carry a password.
  const variable = valueOf(env, 'DATABASE_URL_FILE') === undefined ? 'DATABASE_URL' : 'DATABASE_URL (read from DATABASE_URL_FILE)'
  if (isPostgresUrl(url) && POSTGRES_HOST_LIST.test(url)) {
    throw new ConfigError(variable, 'names several PostgreSQL hosts (a libpq host list or target_session_attrs), which the driver does not follow: ' +
      'name one address that always leads to the primary (a DNS name, a virtual IP or a proxy)')
  }
  if (isPostgresUrl(url) && URL.canParse(url)) return url
  throw new ConfigError(variable, 'must be "memory:", "sqlite:<file path>" or "postgres://user:password@host:port/database"')
}

/**
 * The tokens of `PLANTSTORE_TOKENS_FILE` (read again now) or `PLANTSTORE_TOKENS`: what `SIGHUP` reloads.
 * Unlike at start, a token file without entries is valid here: removing the last line of the file is how
 * an operator withdraws its last token. Throws ConfigError naming the variable when they are not valid.
 */
export function loadConfiguredTokens (env: Env = process.env): ConfiguredToken[] {
  return tokensVariable(env, 'allowed')
}

/** `PLANTSTORE_TOKENS`, or `PLANTSTORE_TOKENS_FILE` with one entry per line or comma-separated and `#` comment lines. */
function tokensVariable (env: Env, noEntries: 'refused' | 'allowed' = 'refused'): ConfiguredToken[] {
  const text = secretOf(env, 'PLANTSTORE_TOKENS', noEntries)
  if (text === undefined) return []
  const fromFile = valueOf(env, 'PLANTSTORE_TOKENS_FILE') !== undefined
  const entries = fromFile
    ? text.split('\n').filter((line) => !line.trimStart().startsWith('#')).join(',')
    : text
  if (noEntries === 'allowed' && entries.split(',').every((entry) => entry.trim() === '')) return []
  try {
    return parseTokenList(entries)
  } catch (error) {
    throw new ConfigError(fromFile ? 'PLANTSTORE_TOKENS_FILE' : 'PLANTSTORE_TOKENS', (error as Error).message)
  }
}

function logLevelVariable (env: Env): LogLevel {
  const level = valueOf(env, 'LOG_LEVEL') ?? 'info'
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`)
  }
  return level as LogLevel
}
