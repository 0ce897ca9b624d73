import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import { AccessTokenRegistry, TokenNameClashError } from './auth/token-registry.js'
import { InvalidConfigError, loadConfig, loadConfiguredTokens, loadDotEnvFile } from './config.js'
import { StoreOpenError, StoreUnavailableError } from './store/plant-store.js'
import { openStore } from './store/open-store.js'

/** How long a graceful stop may take before the process gives up on in-flight work. */
const SHUTDOWN_DEADLINE_MS = 8_000
/**
 * How often the store's token revision is read, so a token made or revoked by another instance or by
 * the command line takes effect here within this (PostgreSQL also pushes changes with `NOTIFY`).
 */
const TOKEN_POLL_MS = 1_000

async function main (): Promise<void> {
  loadDotEnvFile()
  const config = loadConfig()
  const store = await openStore(config.databaseUrl, config.database)
  const accessTokens = new AccessTokenRegistry(store.tokens, config.tokens)
  const { initialAdminToken } = await untilStoreAnswers(async () => {
    const loaded = await accessTokens.load()
    accessTokens.replaceEnvironment(config.tokens)
    return loaded
  })
  const app = await buildApp(config, { store, accessTokens })
  app.log.info({ store: store.backend }, 'store opened')
  accessTokens.watch(TOKEN_POLL_MS, (error) => { app.log.warn({ err: error }, 'could not read the access tokens; keeping the current ones') })
  reloadTokenFileOnHangup(app, accessTokens)
  stopGracefullyOnSignals(app)
  const address = await app.listen({ port: config.port, host: config.host })
  if (initialAdminToken !== undefined) announceInitialAdminToken(initialAdminToken, address)
}

/** Retries `operation` while the store is unavailable (a database still starting), saying so once a second. */
async function untilStoreAnswers<T> (operation: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await operation()
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error
      process.stderr.write(`plantstore: waiting for the database (${error.message})\n`)
      await sleep(1000)
    }
  }
}

/**
 * `SIGHUP` reads `PLANTSTORE_TOKENS_FILE` again (a process's environment cannot change, a file can). A
 * file that is not valid is reported and changes nothing: the tokens in use stay.
 */
function reloadTokenFileOnHangup (app: FastifyInstance, accessTokens: AccessTokenRegistry): void {
  const reload = () => {
    try {
      const tokens = loadConfiguredTokens()
      accessTokens.replaceEnvironment(tokens)
      app.log.info({ tokens: tokens.map((token) => token.name) }, 'SIGHUP: token file read again')
    } catch (error) {
      app.log.error(`SIGHUP: the token file was not loaded, the tokens in use stay: ${(error as Error).message}`)
    }
  }
  process.on('SIGHUP', reload)
}

function stopGracefullyOnSignals (app: FastifyInstance): void {
  const stop = (signal: NodeJS.Signals) => {
    app.log.info({ signal }, 'stopping: finishing in-flight requests')
    setTimeout(() => {
      app.log.error('graceful stop took too long; exiting')
      process.exit(1)
    }, SHUTDOWN_DEADLINE_MS).unref()
    app.close().then(
      () => { process.exitCode = 0 },
      (error: unknown) => {
        app.log.error({ err: error }, 'error while stopping')
        process.exitCode = 1
      })
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

function announceInitialAdminToken (token: string, address: string): void {
  process.stderr.write([
    '',
    'No PLANTSTORE_TOKENS configured: plantstore made the access token "initial-admin" with every scope',
    '(plants:read, plants:write, admin). It is shown only now; only its SHA-256 digest is stored, and later',
    'starts on the same database keep accepting it. Make narrower tokens with it (README, "Tokens").',
    '',
    `  ${token}`,
    '',
    'Try it:',
    `  curl -i -H 'Authorization: Bearer ${token}' -H 'Content-Type: application/json' \\`,
    `    -d '{"id":1,"name":"Monstera deliciosa","tag":"tropical"}' ${address}/plants`,
    '',
    ''
  ].join('\n'))
}

/** One line per problem, each naming what to fix. */
function reasonsNotToStart (error: unknown): string[] {
  if (error instanceof InvalidConfigError) return error.errors.map((problem) => `configuration error: ${problem.message}`)
  if (error instanceof StoreOpenError) return [error.message]
  if (error instanceof TokenNameClashError) return [error.message]
  return [String(error)]
}

main().catch((error: unknown) => {
  process.stderr.write(reasonsNotToStart(error).map((reason) => `plantstore could not start: ${reason}\n`).join(''))
  process.exit(1)
})
