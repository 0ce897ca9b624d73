import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { digestToken } from '../src/auth/tokens.js'
import { ConfigError, InvalidConfigError, loadConfig } from '../src/config.js'
import { temporaryFolder } from './helper.js'

const DATABASE_URL_RULE = 'DATABASE_URL must be "memory:", "sqlite:<file path>" or "postgres://user:password@host:port/database"'

describe('Configuration from the environment', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({}, false)

    expect(config).toEqual({
      port: 3000,
      host: '127.0.0.1',
      databaseUrl: 'sqlite:./data/plantstore.db',
      database: { poolSize: 10, connectTimeoutMs: 2000, statementTimeoutMs: 5000 },
      tokens: [],
      logLevel: 'info',
      bodyLimit: 16384,
      rateLimitPerMinute: 0,
      maxEventLoopDelayMs: 200,
      maxInFlightRequests: 512,
      prettyLogs: false
    })
    expect(Object.isFrozen(config)).toBe(true)
  })

  it('reads every variable', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '0.0.0.0',
      DATABASE_URL: 'postgresql://plantstore:pw@db.internal:5432/plants',
      DATABASE_POOL_SIZE: '20',
      DATABASE_CONNECT_TIMEOUT_MS: '1500',
      DATABASE_STATEMENT_TIMEOUT_MS: '3000',
      PLANTSTORE_TOKENS: 'abc',
      LOG_LEVEL: 'warn',
      BODY_LIMIT: '1024',
      RATE_LIMIT_PER_MINUTE: '600',
      SHED_EVENT_LOOP_DELAY_MS: '0',
      SHED_IN_FLIGHT_REQUESTS: '64'
    }, true)

    expect(config).toEqual({
      port: 8080,
      host: '0.0.0.0',
      databaseUrl: 'postgresql://plantstore:pw@db.internal:5432/plants',
      database: { poolSize: 20, connectTimeoutMs: 1500, statementTimeoutMs: 3000 },
      tokens: [{ name: 'environment-1', scopes: ['plants:read', 'plants:write'], digest: digestToken('abc') }],
      logLevel: 'warn',
      bodyLimit: 1024,
      rateLimitPerMinute: 600,
      maxEventLoopDelayMs: 0,
      maxInFlightRequests: 64,
      prettyLogs: true
    })
  })

  it.each([
    ['PORT', 'abc', 'PORT must be a whole number from 0 to 65535, got "abc"'],
    ['PORT', '70000', 'PORT must be a whole number from 0 to 65535, got "70000"'],
    ['PORT', '-1', 'PORT must be a whole number from 0 to 65535, got "-1"'],
    ['BODY_LIMIT', '1.5', 'BODY_LIMIT must be a whole number from 1 to 67108864, got "1.5"'],
    ['BODY_LIMIT', '0', 'BODY_LIMIT must be a whole number from 1 to 67108864, got "0"'],
    ['LOG_LEVEL', 'loud', 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    ['HOST', 'bad host', 'HOST must be a host name or IP address, got "bad host"'],
    ['DATABASE_URL', 'mysql://user:secret@db/plants', DATABASE_URL_RULE],
    ['DATABASE_URL', 'sqlite:', DATABASE_URL_RULE],
    ['DATABASE_URL', 'postgres://user:secret@[bad', DATABASE_URL_RULE],
    ['RATE_LIMIT_PER_MINUTE', '-5', 'RATE_LIMIT_PER_MINUTE must be a whole number from 0 to 10000000, got "-5"'],
    ['SHED_EVENT_LOOP_DELAY_MS', 'fast', 'SHED_EVENT_LOOP_DELAY_MS must be a whole number from 0 to 60000, got "fast"'],
    ['SHED_IN_FLIGHT_REQUESTS', '-1', 'SHED_IN_FLIGHT_REQUESTS must be a whole number from 0 to 1000000, got "-1"'],
    ['DATABASE_POOL_SIZE', '0', 'DATABASE_POOL_SIZE must be a whole number from 1 to 1000, got "0"'],
    ['DATABASE_CONNECT_TIMEOUT_MS', 'soon', 'DATABASE_CONNECT_TIMEOUT_MS must be a whole number from 100 to 600000, got "soon"'],
    ['DATABASE_STATEMENT_TIMEOUT_MS', '10', 'DATABASE_STATEMENT_TIMEOUT_MS must be a whole number from 100 to 600000, got "10"'],
    ['PLANTSTORE_TOKENS', 'good,secret value', 'PLANTSTORE_TOKENS entry 2 is not a valid bearer token (allowed: letters, digits, - . _ ~ + / and trailing =)']
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
