import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { digestToken } from '../src/auth/tokens.js'
import { ConfigError, DEFAULT_CHANGES_CONFIG, DEFAULT_WEBHOOK_CONFIG, InvalidConfigError, loadConfig } from '../src/config.js'
import { temporaryFolder } from './helpers/app.js'

const DATABASE_URL_RULE = 'DATABASE_URL must be "memory:", "sqlite:<file path>" or "postgres://user:password@host:port/database"'
const MULTI_HOST_RULE = 'DATABASE_URL names several PostgreSQL hosts (a libpq host list or target_session_attrs), which the driver does not follow: ' +
  'name one address that always leads to the primary (a DNS name, a virtual IP or a proxy)'
const CORS_ORIGINS_RULE = 'CORS_ORIGINS must be "*" or comma-separated origins like https://app.example.com (no path or trailing slash)'
const CHANGES_RETENTION_RULE = 'CHANGES_RETENTION must be a duration such as 90s, 15m, 36h or 30d (at most 3650d)'
const TRUST_PROXY_RULE = 'TRUST_PROXY must be "true", "false", or comma-separated proxy addresses or CIDRs (or loopback, linklocal, uniquelocal)'

describe('Configuration from the environment', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({}, false)

    expect(config).toEqual({
      port: 3000,
      host: '127.0.0.1',
      databaseUrl: 'sqlite:./data/plantstore.db',
      database: { poolSize: 10, connectTimeoutMs: 2000, statementTimeoutMs: 5000, pooling: 'direct' },
      tokens: [],
      jwt: undefined,
      logLevel: 'info',
      bodyLimit: 16384,
      batchBodyLimit: 1048576,
      rateLimitPerMinute: 0,
      authFailureLimitPerMinute: 100,
      maxEventLoopDelayMs: 200,
      maxInFlightRequests: 512,
      prettyLogs: false,
      webhooks: DEFAULT_WEBHOOK_CONFIG,
      metricsPort: 9464,
      tracing: false,
      otlpProtocol: 'http/protobuf',
      corsOrigins: [],
      trustProxy: false,
      changes: DEFAULT_CHANGES_CONFIG
    })
    expect(DEFAULT_CHANGES_CONFIG).toEqual({ retentionMs: 30 * 24 * 3600_000, streamsMax: 1000 })
    expect(DEFAULT_WEBHOOK_CONFIG).toEqual({
      deliver: true,
      allowPrivateNetworks: false,
      secretsKey: undefined,
      previousSecretsKeys: [],
      concurrency: 32,
      concurrencyPerSubscription: 16,
      firstRetryMs: 5000,
      maxRetryMs: 3_600_000,
      retryForMs: 86_400_000,
      leaseMs: 30_000
    })
    expect(Object.isFrozen(config)).toBe(true)
    expect(Object.isFrozen(config.webhooks)).toBe(true)
    expect(Object.isFrozen(config.corsOrigins)).toBe(true)
    expect(Object.isFrozen(config.changes)).toBe(true)
  })

  it('reads every variable', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '0.0.0.0',
      DATABASE_URL: 'postgresql://plantstore:pw@db.internal:5432/plants',
      DATABASE_POOL_SIZE: '20',
      DATABASE_CONNECT_TIMEOUT_MS: '1500',
      DATABASE_STATEMENT_TIMEOUT_MS: '3000',
      DATABASE_POOLING: 'transaction',
      PLANTSTORE_TOKENS: 'abc',
      LOG_LEVEL: 'warn',
      BODY_LIMIT: '1024',
      BATCH_BODY_LIMIT: '2048',
      RATE_LIMIT_PER_MINUTE: '600',
      AUTH_FAILURE_LIMIT_PER_MINUTE: '20',
      SHED_EVENT_LOOP_DELAY_MS: '0',
      SHED_IN_FLIGHT_REQUESTS: '64',
      WEBHOOK_DELIVERY: 'false',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_SECRETS_KEY: '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff',
      WEBHOOK_CONCURRENCY: '4',
      WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION: '3',
      WEBHOOK_RETRY_FIRST_MS: '1000',
      WEBHOOK_RETRY_MAX_MS: '60000',
      WEBHOOK_RETRY_FOR_MS: '3600000',
      WEBHOOK_LEASE_MS: '11000',
      METRICS_PORT: '9100',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      CORS_ORIGINS: 'https://app.example.com, http://localhost:5173',
      TRUST_PROXY: '10.0.0.0/8',
      CHANGES_RETENTION: '36h',
      CHANGES_STREAMS_MAX: '50'
    }, true)

    expect(config).toEqual({
      port: 8080,
      host: '0.0.0.0',
      databaseUrl: 'postgresql://plantstore:pw@db.internal:5432/plants',
      database: { poolSize: 20, connectTimeoutMs: 1500, statementTimeoutMs: 3000, pooling: 'transaction' },
      tokens: [{ name: 'environment-1', scopes: ['plants:read', 'plants:write'], digest: digestToken('abc') }],
      logLevel: 'warn',
      bodyLimit: 1024,
      batchBodyLimit: 2048,
      rateLimitPerMinute: 600,
      authFailureLimitPerMinute: 20,
      maxEventLoopDelayMs: 0,
      maxInFlightRequests: 64,
      prettyLogs: true,
      webhooks: {
        deliver: false,
        allowPrivateNetworks: true,
        secretsKey: Buffer.from('00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff', 'hex'),
        previousSecretsKeys: [],
        concurrency: 4,
        concurrencyPerSubscription: 3,
        firstRetryMs: 1000,
        maxRetryMs: 60_000,
        retryForMs: 3_600_000,
        leaseMs: 11_000
      },
      metricsPort: 9100,
      tracing: true,
      otlpProtocol: 'http/protobuf',
      corsOrigins: ['https://app.example.com', 'http://localhost:5173'],
      trustProxy: '10.0.0.0/8',
      changes: { retentionMs: 36 * 3600_000, streamsMax: 50 }
    })
  })

  it.each([
    ['PORT', 'abc', 'PORT must be a whole number from 0 to 65535, got "abc"'],
    ['PORT', '70000', 'PORT must be a whole number from 0 to 65535, got "70000"'],
    ['PORT', '-1', 'PORT must be a whole number from 0 to 65535, got "-1"'],
    ['BODY_LIMIT', '1.5', 'BODY_LIMIT must be a whole number from 1 to 67108864, got "1.5"'],
    ['BODY_LIMIT', '0', 'BODY_LIMIT must be a whole number from 1 to 67108864, got "0"'],
    ['BATCH_BODY_LIMIT', '1048576.5', 'BATCH_BODY_LIMIT must be a whole number from 1 to 67108864, got "1048576.5"'],
    ['LOG_LEVEL', 'loud', 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    ['HOST', 'bad host', 'HOST must be a host name or IP address, got "bad host"'],
    ['DATABASE_URL', 'mysql://user:secret@db/plants', DATABASE_URL_RULE],
    ['DATABASE_URL', 'sqlite:', DATABASE_URL_RULE],
    ['DATABASE_URL', 'postgres://user:secret@[bad', DATABASE_URL_RULE],
    ['DATABASE_URL', 'postgres://user:secret@db1,db2/plants?target_session_attrs=read-write', MULTI_HOST_RULE],
    ['DATABASE_URL', 'postgresql://user:secret@db1:5432,db2:5432/plants', MULTI_HOST_RULE],
    ['DATABASE_URL', 'postgres://user:secret@db1/plants?target_session_attrs=read-write', MULTI_HOST_RULE],
    ['DATABASE_URL', 'postgres:///plants?host=/run/a,/run/b', MULTI_HOST_RULE],
    ['RATE_LIMIT_PER_MINUTE', '-5', 'RATE_LIMIT_PER_MINUTE must be a whole number from 0 to 10000000, got "-5"'],
    ['AUTH_FAILURE_LIMIT_PER_MINUTE', 'many', 'AUTH_FAILURE_LIMIT_PER_MINUTE must be a whole number from 0 to 10000000, got "many"'],
    ['SHED_EVENT_LOOP_DELAY_MS', 'fast', 'SHED_EVENT_LOOP_DELAY_MS must be a whole number from 0 to 60000, got "fast"'],
    ['SHED_IN_FLIGHT_REQUESTS', '-1', 'SHED_IN_FLIGHT_REQUESTS must be a whole number from 0 to 1000000, got "-1"'],
    ['DATABASE_POOL_SIZE', '0', 'DATABASE_POOL_SIZE must be a whole number from 1 to 1000, got "0"'],
    ['DATABASE_CONNECT_TIMEOUT_MS', 'soon', 'DATABASE_CONNECT_TIMEOUT_MS must be a whole number from 100 to 600000, got "soon"'],
    ['DATABASE_STATEMENT_TIMEOUT_MS', '10', 'DATABASE_STATEMENT_TIMEOUT_MS must be a whole number from 100 to 600000, got "10"'],
    ['DATABASE_POOLING', 'statement', 'DATABASE_POOLING must be "direct", "session" or "transaction" (PgBouncer\'s pool_mode), got "statement"'],
    ['PLANTSTORE_TOKENS', 'good,secret value', 'PLANTSTORE_TOKENS entry 2 is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)'],
    ['WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'yes', 'WEBHOOK_ALLOW_PRIVATE_NETWORKS must be "true" or "false", got "yes"'],
    ['WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'TRUE', 'WEBHOOK_ALLOW_PRIVATE_NETWORKS must be "true" or "false", got "TRUE"'],
    ['WEBHOOK_CONCURRENCY', '0', 'WEBHOOK_CONCURRENCY must be a whole number from 1 to 1024, got "0"'],
    ['WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION', '0', 'WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION must be a whole number from 1 to 1024, got "0"'],
    ['WEBHOOK_RETRY_FIRST_MS', '99', 'WEBHOOK_RETRY_FIRST_MS must be a whole number from 100 to 3600000, got "99"'],
    ['WEBHOOK_RETRY_MAX_MS', '1h', 'WEBHOOK_RETRY_MAX_MS must be a whole number from 100 to 86400000, got "1h"'],
    ['WEBHOOK_RETRY_FOR_MS', '999', 'WEBHOOK_RETRY_FOR_MS must be a whole number from 1000 to 2592000000, got "999"'],
    ['WEBHOOK_LEASE_MS', '10999', 'WEBHOOK_LEASE_MS must be a whole number from 11000 to 3600000, got "10999"'],
    ['METRICS_PORT', '65536', 'METRICS_PORT must be a whole number from 0 to 65535, got "65536"'],
    ['METRICS_PORT', 'off', 'METRICS_PORT must be a whole number from 0 to 65535, got "off"'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318', 'OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL (OTLP over HTTP), got "collector:4318"'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://collector:4317', 'OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL (OTLP over HTTP), got "grpc://collector:4317"'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'not a url', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http or https URL (OTLP over HTTP), got "not a url"'],
    ['CORS_ORIGINS', 'https://app.example.com/', `${CORS_ORIGINS_RULE}, got "https://app.example.com/"`],
    ['CORS_ORIGINS', 'https://app.example.com/plants', `${CORS_ORIGINS_RULE}, got "https://app.example.com/plants"`],
    ['CORS_ORIGINS', 'app.example.com', `${CORS_ORIGINS_RULE}, got "app.example.com"`],
    ['CORS_ORIGINS', 'https://app.example.com,*', `${CORS_ORIGINS_RULE}, got "*"`],
    ['CORS_ORIGINS', 'null', `${CORS_ORIGINS_RULE}, got "null"`],
    ['CORS_ORIGINS', ' , ', 'CORS_ORIGINS must name at least one origin, or "*"'],
    ['TRUST_PROXY', 'yes', `${TRUST_PROXY_RULE}, got "yes"`],
    ['TRUST_PROXY', '1', `${TRUST_PROXY_RULE}, got "1"`],
    ['TRUST_PROXY', '10.0.0.0/33', `${TRUST_PROXY_RULE}, got "10.0.0.0/33"`],
    ['TRUST_PROXY', '10.0.0.0/8,', `${TRUST_PROXY_RULE}, got "10.0.0.0/8,"`],
    ['TRUST_PROXY', 'proxy.internal', `${TRUST_PROXY_RULE}, got "proxy.internal"`],
    ['TRUST_PROXY', '::1/129', `${TRUST_PROXY_RULE}, got "::1/129"`],
    ['CHANGES_RETENTION', '30', `${CHANGES_RETENTION_RULE}, got "30"`],
    ['CHANGES_STREAMS_MAX', '-1', 'CHANGES_STREAMS_MAX must be a whole number from 0 to 100000, got "-1"']
  ])('stops on a bad %s=%j with one line naming it', (variable, value, message) => {
    const [problem] = problemsOf({ [variable]: value })

    expect(problem).toBeInstanceOf(ConfigError)
    expect(problem?.variable).toBe(variable)
    expect(problem?.message).toBe(message)
    expect(problem?.message).not.toContain('\n')
    expect(problem?.message).not.toContain('secret')
  })

  it('reports every bad variable of a start at once, in a line each', () => {
    const problems = problemsOf({ PORT: 'abc', LOG_LEVEL: 'loud', PLANTSTORE_TOKENS: 'bad token', DATABASE_POOL_SIZE: '5' })

    expect(problems.map((problem) => problem.message)).toEqual([
      'PORT must be a whole number from 0 to 65535, got "abc"',
      'PLANTSTORE_TOKENS entry 1 is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)',
      'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'
    ])
  })
})

describe('Webhook settings', () => {
  it.each([['true', true], ['false', false]])('reads WEBHOOK_ALLOW_PRIVATE_NETWORKS=%s', (value, allowed) => {
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: value }, false).webhooks.allowPrivateNetworks).toBe(allowed)
  })

  it('takes WEBHOOK_SECRETS_KEY as 64 hexadecimal digits or as base64 (padded, unpadded, URL-safe), each the same 32 bytes', () => {
    const key = randomBytes(32)
    const keyOf = (text: string) => loadConfig({ WEBHOOK_SECRETS_KEY: text }, false).webhooks.secretsKey

    expect(keyOf(key.toString('hex'))).toEqual(key)
    expect(keyOf(key.toString('hex').toUpperCase())).toEqual(key)
    expect(keyOf(key.toString('base64'))).toEqual(key)
    expect(keyOf(key.toString('base64').replace(/=$/, ''))).toEqual(key)
    expect(keyOf(key.toString('base64url'))).toEqual(key)
    expect(keyOf(key.toString('base64'))?.length).toBe(32)
  })

  it.each([
    ['63 hexadecimal digits', randomBytes(32).toString('hex').slice(1)],
    ['65 hexadecimal digits', `${randomBytes(32).toString('hex')}a`],
    ['64 characters that are not all hexadecimal', `g${randomBytes(32).toString('hex').slice(1)}`],
    ['the base64 of 31 bytes', randomBytes(31).toString('base64')],
    ['the base64 of 33 bytes', randomBytes(33).toString('base64')],
    ['a passphrase', 'correct horse battery staple']
  ])('refuses a WEBHOOK_SECRETS_KEY of %s without echoing it', (_kind, value) => {
    const problems = problemsOf({ WEBHOOK_SECRETS_KEY: value })

    expect(problems.map((problem) => [problem.variable, problem.message])).toEqual([[
      'WEBHOOK_SECRETS_KEY',
      'WEBHOOK_SECRETS_KEY must hold 32 bytes as 64 hexadecimal digits or as base64 (openssl rand -base64 32)'
    ]])
    expect(problems[0]?.message).not.toContain(value)
  })

  it('reads WEBHOOK_SECRETS_KEY_FILE, and names the file variable, not the key, when it holds a bad one', () => {
    const key = randomBytes(32)
    const good = join(temporaryFolder(), 'webhook-key')
    writeFileSync(good, `${key.toString('base64')}\n`)
    const bad = join(temporaryFolder(), 'webhook-key')
    writeFileSync(bad, 'not a key\n')

    expect(loadConfig({ WEBHOOK_SECRETS_KEY_FILE: good, WEBHOOK_SECRETS_KEY: 'ignored' }, false).webhooks.secretsKey).toEqual(key)
    expect(problemsOf({ WEBHOOK_SECRETS_KEY_FILE: bad }).map((problem) => problem.message))
      .toEqual(['WEBHOOK_SECRETS_KEY_FILE must hold 32 bytes as 64 hexadecimal digits or as base64 (openssl rand -base64 32)'])
  })

  it('reads WEBHOOK_SECRETS_PREVIOUS_KEYS: comma-separated keys in either form, one per line in its file', () => {
    const [key, older, oldest] = [randomBytes(32), randomBytes(32), randomBytes(32)]
    const file = join(temporaryFolder(), 'previous-keys')
    writeFileSync(file, `${older.toString('hex')}\n${oldest.toString('base64')}\n`)
    const previousOf = (env: Record<string, string>) => loadConfig({ WEBHOOK_SECRETS_KEY: key.toString('hex'), ...env }, false).webhooks.previousSecretsKeys

    expect(previousOf({})).toEqual([])
    expect(previousOf({ WEBHOOK_SECRETS_PREVIOUS_KEYS: `${older.toString('base64url')}, ${oldest.toString('hex')}` })).toEqual([older, oldest])
    expect(previousOf({ WEBHOOK_SECRETS_PREVIOUS_KEYS_FILE: file })).toEqual([older, oldest])
  })

  it('refuses WEBHOOK_SECRETS_PREVIOUS_KEYS without WEBHOOK_SECRETS_KEY, and an entry that is not a key, without echoing it', () => {
    const older = randomBytes(32).toString('hex')

    expect(problemsOf({ WEBHOOK_SECRETS_PREVIOUS_KEYS: older }).map((problem) => [problem.variable, problem.message])).toEqual([[
      'WEBHOOK_SECRETS_PREVIOUS_KEYS',
      'WEBHOOK_SECRETS_PREVIOUS_KEYS needs WEBHOOK_SECRETS_KEY: secrets are sealed with the current key, and going back to no key is not supported'
    ]])
    const bad = problemsOf({ WEBHOOK_SECRETS_KEY: randomBytes(32).toString('hex'), WEBHOOK_SECRETS_PREVIOUS_KEYS: `${older},not-a-key` })
    expect(bad.map((problem) => problem.message)).toEqual([
      'WEBHOOK_SECRETS_PREVIOUS_KEYS must hold comma-separated keys of 32 bytes as 64 hexadecimal digits or as base64; entry 2 is not one'
    ])
    expect(bad[0]?.message).not.toContain(older)
  })

  it('accepts the shortest lease, 11000 ms: longer than a delivery may take', () => {
    expect(loadConfig({ WEBHOOK_LEASE_MS: '11000' }, false).webhooks.leaseMs).toBe(11_000)
  })

  it.each([['16', 8], ['5', 2], ['1', 1]])('gives a subscription half of WEBHOOK_CONCURRENCY=%s by default: %i', (concurrency, share) => {
    expect(loadConfig({ WEBHOOK_CONCURRENCY: concurrency }, false).webhooks.concurrencyPerSubscription).toBe(share)
  })
})

describe('Metrics, tracing, CORS and proxy settings', () => {
  it.each([['0', 0], ['9464', 9464], ['65535', 65535]])('reads METRICS_PORT=%s (0 turns metrics off)', (value, port) => {
    expect(loadConfig({ METRICS_PORT: value }, false).metricsPort).toBe(port)
  })

  it.each<[string, Record<string, string>, boolean]>([
    ['no endpoint', {}, false],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example.com/v1/traces' }, true],
    ['an empty endpoint (unset, as the specification reads it)', { OTEL_EXPORTER_OTLP_ENDPOINT: '' }, false],
    ['OTEL_SDK_DISABLED=true', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }, false],
    ['OTEL_SDK_DISABLED=TRUE', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }, false],
    ['OTEL_SDK_DISABLED=false', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'false' }, true],
    ['OTEL_TRACES_EXPORTER=none', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }, false],
    ['OTEL_TRACES_EXPORTER=None', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'None' }, false],
    ['OTEL_TRACES_EXPORTER=otlp, none', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'otlp, none' }, false],
    ['OTEL_TRACES_EXPORTER=otlp', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'otlp' }, true]
  ])('turns tracing on or off for %s', (_case, env, tracing) => {
    expect(loadConfig(env, false).tracing).toBe(tracing)
  })

  it.each<[Record<string, string>, string]>([
    [{}, 'http/protobuf'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, 'http/json'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }, 'http/protobuf']
  ])('reads the OTLP protocol from %j with an endpoint set (the traces variable wins)', (env, protocol) => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', ...env }, false).otlpProtocol).toBe(protocol)
  })

  it('refuses an OTLP protocol it cannot export when tracing is on, and ignores it when tracing is off', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }
    expect(problemsOf({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).map((problem) => problem.message))
      .toEqual(['OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf" or "http/json" (gRPC is not supported), got "grpc"'])
    expect(problemsOf({ ...endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'json' }).map((problem) => problem.message))
      .toEqual(['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be "http/protobuf" or "http/json" (gRPC is not supported), got "json"'])
    expect(loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, false)).toMatchObject({ tracing: false, otlpProtocol: 'http/protobuf' })
    expect(loadConfig({ ...endpoint, OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, false).tracing).toBe(false)
  })

  it('refuses METRICS_PORT equal to PORT, naming both', () => {
    expect(problemsOf({ PORT: '8080', METRICS_PORT: '8080' }).map((problem) => problem.message))
      .toEqual(['METRICS_PORT must differ from PORT (8080): /metrics has a listener of its own; 0 turns it off'])
    expect(problemsOf({ PORT: '9464' }).map((problem) => problem.message))
      .toEqual(['METRICS_PORT must differ from PORT (9464): /metrics has a listener of its own; 0 turns it off'])
    expect(loadConfig({ PORT: '0', METRICS_PORT: '0' }, false)).toMatchObject({ port: 0, metricsPort: 0 })
  })

  it('judges the traces endpoint, which wins over the general one, and names the variable it came from', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces', OTEL_EXPORTER_OTLP_ENDPOINT: 'bad' }, false).tracing).toBe(true)
    expect(problemsOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://collector', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })
      .map((problem) => problem.variable)).toEqual(['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'])
  })

  it.each<[string, '*' | string[]]>([
    ['*', '*'],
    [' * ', '*'],
    ['https://app.example.com', ['https://app.example.com']],
    ['https://app.example.com, http://localhost:5173,http://127.0.0.1:8080', ['https://app.example.com', 'http://localhost:5173', 'http://127.0.0.1:8080']],
    ['https://app.example.com,', ['https://app.example.com']],
    ['http://[::1]:8080', ['http://[::1]:8080']]
  ])('reads CORS_ORIGINS=%j', (value, origins) => {
    expect(loadConfig({ CORS_ORIGINS: value }, false).corsOrigins).toEqual(origins)
  })

  it.each<[string, boolean | string]>([
    ['false', false],
    ['true', true],
    ['127.0.0.1', '127.0.0.1'],
    ['10.0.0.0/8, 192.168.0.0/16 ,127.0.0.1', '10.0.0.0/8,192.168.0.0/16,127.0.0.1'],
    ['::1,fd00::/8', '::1,fd00::/8'],
    ['loopback,uniquelocal,linklocal', 'loopback,uniquelocal,linklocal']
  ])('reads TRUST_PROXY=%j', (value, trustProxy) => {
    expect(loadConfig({ TRUST_PROXY: value }, false).trustProxy).toBe(trustProxy)
  })
})

describe('Change log settings', () => {
  it.each([
    ['90s', 90_000],
    ['1s', 1000],
    ['15m', 900_000],
    ['36h', 129_600_000],
    ['30d', 2_592_000_000],
    ['3650d', 315_360_000_000],
    ['87600h', 315_360_000_000]
  ])('reads CHANGES_RETENTION=%s as %i ms', (value, retentionMs) => {
    expect(loadConfig({ CHANGES_RETENTION: value }, false).changes.retentionMs).toBe(retentionMs)
  })

  it('keeps the default, 30 days, when CHANGES_RETENTION is empty', () => {
    expect(loadConfig({ CHANGES_RETENTION: '' }, false).changes.retentionMs).toBe(2_592_000_000)
  })

  it.each(['30', 'd', '0s', '0d', '030d', '-1d', '1.5h', '30 d', ' 30d', '30d ', '30D', '1w', '2y', '30ms', '3651d', '1000000000s', 'P30D'])(
    'stops on CHANGES_RETENTION=%j with its one line', (value) => {
      const problems = problemsOf({ CHANGES_RETENTION: value })

      expect(problems.map((problem) => [problem.variable, problem.message])).toEqual([['CHANGES_RETENTION', `${CHANGES_RETENTION_RULE}, got ${JSON.stringify(value)}`]])
    })

  it.each([['0', 0], ['1', 1], ['1000', 1000], ['100000', 100_000]])('reads CHANGES_STREAMS_MAX=%s (0: no live stream, each a 503)', (value, streamsMax) => {
    expect(loadConfig({ CHANGES_STREAMS_MAX: value }, false).changes.streamsMax).toBe(streamsMax)
  })

  it.each(['-1', '100001', '1e3', '10.5', 'many', 'unlimited'])('stops on CHANGES_STREAMS_MAX=%j with its one line', (value) => {
    const problems = problemsOf({ CHANGES_STREAMS_MAX: value })

    expect(problems.map((problem) => [problem.variable, problem.message]))
      .toEqual([['CHANGES_STREAMS_MAX', `CHANGES_STREAMS_MAX must be a whole number from 0 to 100000, got ${JSON.stringify(value)}`]])
  })
})

describe('Secrets from files (the _FILE variants Docker and Kubernetes secrets provide)', () => {
  function secretFile (contents: string): string {
    const file = join(temporaryFolder(), 'secret')
    writeFileSync(file, contents)
    return file
  }

  it('reads DATABASE_URL_FILE, without the final newline', () => {
    const file = secretFile('postgres://plantstore:pw@db.internal:5432/plants\n')

    expect(loadConfig({ DATABASE_URL_FILE: file }, false).databaseUrl).toBe('postgres://plantstore:pw@db.internal:5432/plants')
  })

  it('reads PLANTSTORE_TOKENS_FILE with one entry per line, comma-separated entries and # comment lines', () => {
    const digest = digestToken('third').toString('hex')
    const file = secretFile(`# CI and the dashboard\nfirst\n  second , sha256:${digest}\n\n`)

    expect(loadConfig({ PLANTSTORE_TOKENS_FILE: file }, false).tokens.map((token) => [token.name, token.digest]))
      .toEqual([['environment-1', digestToken('first')], ['environment-2', digestToken('second')], ['environment-3', digestToken('third')]])
  })

  it('takes the file over the variable when both are set (the image sets DATABASE_URL to its SQLite default)', () => {
    const url = secretFile('postgres://plantstore:pw@db.internal:5432/plants\n')
    const tokens = secretFile('from-the-file\n')

    const config = loadConfig({ DATABASE_URL: 'sqlite:/data/plantstore.db', DATABASE_URL_FILE: url, PLANTSTORE_TOKENS: 'from-the-variable', PLANTSTORE_TOKENS_FILE: tokens }, false)

    expect(config.databaseUrl).toBe('postgres://plantstore:pw@db.internal:5432/plants')
    expect(config.tokens.map((token) => token.digest)).toEqual([digestToken('from-the-file')])
  })

  it.each([
    [{ DATABASE_URL_FILE: '/nonexistent/url' }, 'DATABASE_URL_FILE names "/nonexistent/url", which cannot be read (ENOENT)'],
    [{ PLANTSTORE_TOKENS_FILE: '/nonexistent/tokens' }, 'PLANTSTORE_TOKENS_FILE names "/nonexistent/tokens", which cannot be read (ENOENT)']
  ])('stops on %j', (env, message) => {
    expect(problemsOf(env).map((problem) => problem.message)).toEqual([message])
  })

  it('names the file variable, not the secret, when a file holds a bad value', () => {
    const tokens = secretFile('good\nsecret value\n')
    const url = secretFile('mysql://user:secret@db/plants\n')
    const empty = secretFile('\n')

    expect(problemsOf({ PLANTSTORE_TOKENS_FILE: tokens, DATABASE_URL_FILE: url }).map((problem) => problem.message)).toEqual([
      `DATABASE_URL (read from DATABASE_URL_FILE) ${DATABASE_URL_RULE.slice('DATABASE_URL '.length)}`,
      'PLANTSTORE_TOKENS_FILE entry 2 is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)'
    ])
    expect(problemsOf({ DATABASE_URL_FILE: empty }).map((problem) => problem.message))
      .toEqual([`DATABASE_URL_FILE names ${JSON.stringify(empty)}, which is empty`])
  })
})

function problemsOf (env: Record<string, string>): readonly ConfigError[] {
  try {
    loadConfig(env, false)
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidConfigError)
    return (error as InvalidConfigError).errors
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`)
}
