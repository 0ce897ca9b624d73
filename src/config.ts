import { parseTokenList } from './auth/tokens.js'
import { isPostgresUrl } from './store/open-store.js'

/**
 * Configuration comes from environment variables only, and this is the only module that reads them.
 * Every variable is validated at start-up; a bad one stops the start with one line naming it.
 */

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = typeof LOG_LEVELS[number]

export interface Config {
  readonly port: number
  readonly host: string
  readonly databaseUrl: string
  /** PostgreSQL only: pool size per instance, connect timeout, statement timeout. */
  readonly database: {
    readonly poolSize: number
    readonly connectTimeoutMs: number
    readonly statementTimeoutMs: number
  }
  /** SHA-256 digests of the accepted tokens; empty means "use the generated token". */
  readonly tokenDigests: readonly Buffer[]
  readonly logLevel: LogLevel
  readonly bodyLimit: number
  /** Requests per minute per token on /plants; 0 turns per-token rate limiting off. */
  readonly rateLimitPerMinute: number
  /** Event-loop delay above which requests are shed with 503; 0 turns load shedding off. */
  readonly maxEventLoopDelayMs: number
  /** Requests answered at once above which new ones are shed with 503; 0 turns this limit off. */
  readonly maxInFlightRequests: number
  /** Human-readable logs (pino-pretty) when standard output is a terminal; JSON lines otherwise. */
  readonly prettyLogs: boolean
}

export class ConfigError extends Error {
  constructor (readonly variable: string, rule: string) {
    super(`${variable} ${rule}`)
    this.name = 'ConfigError'
  }
}

type Env = Readonly<Record<string, string | undefined>>

export function loadConfig (env: Env = process.env, stdoutIsTty = process.stdout.isTTY === true): Config {
  return Object.freeze({
    port: integerVariable(env, 'PORT', 3000, 0, 65535),
    host: hostVariable(env),
    databaseUrl: databaseUrlVariable(env),
    database: Object.freeze({
      poolSize: integerVariable(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
      connectTimeoutMs: integerVariable(env, 'DATABASE_CONNECT_TIMEOUT_MS', 2000, 100, 600_000),
      statementTimeoutMs: integerVariable(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 5000, 100, 600_000)
    }),
    tokenDigests: Object.freeze(tokensVariable(env)),
    logLevel: logLevelVariable(env),
    bodyLimit: integerVariable(env, 'BODY_LIMIT', 16384, 1, 64 * 1024 * 1024),
    rateLimitPerMinute: integerVariable(env, 'RATE_LIMIT_PER_MINUTE', 0, 0, 10_000_000),
    maxEventLoopDelayMs: integerVariable(env, 'SHED_EVENT_LOOP_DELAY_MS', 200, 0, 60_000),
    maxInFlightRequests: integerVariable(env, 'SHED_IN_FLIGHT_REQUESTS', 512, 0, 1_000_000),
    prettyLogs: stdoutIsTty
  })
}

function valueOf (env: Env, name: string): string | undefined {
  const value = env[name]
  return value === undefined || value === '' ? undefined : value
}

function integerVariable (env: Env, name: string, fallback: number, min: number, max: number): number {
  const text = valueOf(env, name)
  if (text === undefined) return fallback
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`)
  }
  return value
}

function hostVariable (env: Env): string {
  const host = valueOf(env, 'HOST') ?? '127.0.0.1'
  if (!/^[\w.:-]+$/.test(host)) {
    throw new ConfigError('HOST', `must be a host name or IP address, got ${JSON.stringify(host)}`)
  }
  return host
}

function databaseUrlVariable (env: Env): string {
  const url = valueOf(env, 'DATABASE_URL') ?? 'sqlite:./data/plantstore.db'
  if (url === 'memory:' || (url.startsWith('sqlite:') && url.length > 'sqlite:'.length)) return url
  if (isPostgresUrl(url) && URL.canParse(url)) return url
  // The value is not echoed: a connection URL may carry a password.
  throw new ConfigError('DATABASE_URL', 'must be "memory:", "sqlite:<file path>" or "postgres://user:password@host:port/database"')
}

function tokensVariable (env: Env): Buffer[] {
  const text = valueOf(env, 'PLANTSTORE_TOKENS')
  if (text === undefined) return []
  try {
    return parseTokenList(text)
  } catch (error) {
    throw new ConfigError('PLANTSTORE_TOKENS', (error as Error).message)
  }
}

function logLevelVariable (env: Env): LogLevel {
  const level = valueOf(env, 'LOG_LEVEL') ?? 'info'
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`)
  }
  return level as LogLevel
}
