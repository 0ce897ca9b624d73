import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import { resolveAccessTokens } from './auth/tokens.js'
import { InvalidConfigError, loadConfig, loadDotEnvFile } from './config.js'
import { StoreOpenError, StoreUnavailableError } from './store/plant-store.js'
import { openStore } from './store/open-store.js'

/** How long a graceful stop may take before the process gives up on in-flight work. */
const SHUTDOWN_DEADLINE_MS = 8_000

async function main (): Promise<void> {
  loadDotEnvFile()
  const config = loadConfig()
  const store = await openStore(config.databaseUrl, config.database)
  const { accessTokens, generatedToken } = await untilStoreAnswers(() => resolveAccessTokens(config.tokenDigests, store))
  const app = await buildApp(config, { store, accessTokens })
  app.log.info({ store: store.backend }, 'store opened')
  stopGracefullyOnSignals(app)
  const address = await app.listen({ port: config.port, host: config.host })
  if (generatedToken !== undefined) announceGeneratedToken(generatedToken, address)
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

function announceGeneratedToken (token: string, address: string): void {
  process.stderr.write([
    '',
    'No PLANTSTORE_TOKENS configured: plantstore generated this access token. It is shown only now;',
    'only its SHA-256 digest is stored, and later starts on the same database keep accepting it.',
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
  return [String(error)]
}

main().catch((error: unknown) => {
  process.stderr.write(reasonsNotToStart(error).map((reason) => `plantstore could not start: ${reason}\n`).join(''))
  process.exit(1)
})
