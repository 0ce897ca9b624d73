import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import pino, { type Logger } from 'pino'
import { buildApp } from './app.js'
import { JwtAccessTokens } from './auth/jwt/jwt-access-tokens.js'
import { AccessTokenRegistry, TOKEN_POLL_MS, TokenNameClashError } from './auth/token-registry.js'
import { InvalidConfigError, loadConfig, loadConfiguredTokens, loadDotEnvFile } from './config.js'
import { StoreOpenError, StoreUnavailableError, type PlantStore } from './store/plant-store.js'
import { SecretBox, storedSecretsState } from './webhooks/secrets.js'
import { openStore } from './store/open-store.js'
import { listenForMetrics, MetricsListenerError, type MetricsListener } from './telemetry/metrics-listener.js'
import { startTracing } from './telemetry/tracing.js'

/** How long a graceful stop may take before the process gives up on in-flight work. */
const SHUTDOWN_DEADLINE_MS = 8_000
/**
 * Connections still open this long into a graceful stop are cut: a client that holds a half-sent request
 * (or does not read its answer) would otherwise keep the listener, and so the store, from closing in time.
 */
const DRAIN_MS = 5_000
/** While the database cannot be reached at start, it is tried again this often, and the wait is logged this often. */
const DATABASE_RETRY_MS = 1_000
const DATABASE_WAIT_LOG_MS = 30_000

async function main (): Promise<void> {
  loadDotEnvFile()
  const config = loadConfig()
  // Lines written before the app has its logger, and the last one after it closed; synchronous, so none is lost at exit.
  const processLog = pino({ level: config.logLevel }, config.prettyLogs ? pino.transport({ target: 'pino-pretty' }) : pino.destination({ dest: 1, sync: true }))
  // Only now is the OpenTelemetry SDK loaded; with tracing off it never is.
  const tracing = config.tracing ? await startTracing(config.otlpProtocol) : undefined
  const store = await openStore(config.databaseUrl, { ...config.database, upkeepLog: processLog })
  await checkWebhookSecrets(store, new SecretBox(config.webhooks.secretsKey, config.webhooks.previousSecretsKeys))
  const accessTokens = new AccessTokenRegistry(store.tokens, config.tokens)
  const { initialAdminToken } = await loadAccessTokens(accessTokens, processLog)
  accessTokens.replaceEnvironment(config.tokens)
  const app = await buildApp({ ...config, metrics: config.metricsPort !== 0 }, {
    store,
    accessTokens,
    ...(config.jwt === undefined ? {} : { jwtAccessTokens: new JwtAccessTokens(config.jwt) }),
    ...(tracing === undefined ? {} : { tracing })
  })
  app.log.info({ store: store.backend }, 'store opened')
  if (tracing !== undefined) app.log.info({ protocol: tracing.protocol }, 'tracing on: spans are exported over OTLP')
  if (config.jwt !== undefined) app.log.info({ issuer: config.jwt.issuer, audiences: config.jwt.audiences }, 'JWT access tokens from the identity provider are accepted')
  if (accessTokens.hasEnvironmentTokens && accessTokens.hasLiveStoredToken('initial-admin')) {
    app.log.warn('the stored token "initial-admin" (all scopes; made by the first start, or the generated token of a release ' +
      'before 1.1, which PLANTSTORE_TOKENS used to switch off) is accepted next to PLANTSTORE_TOKENS: revoke it if it is not in use')
  }
  accessTokens.watch(TOKEN_POLL_MS,
    (error) => { app.log.warn({ err: error }, 'cannot read the access tokens; keeping the ones in use until the store answers') },
    () => { app.log.info('the access tokens are read again') })
  reloadTokenFileOnHangup(app, accessTokens)
  let metricsListener: MetricsListener | undefined
  stopGracefullyOnSignals(app, () => metricsListener, processLog)
  let address
  try {
    // Before the public port, so a start that fails here never took a request.
    if (app.metrics !== null) {
      metricsListener = await listenForMetrics(app.metrics, config.host, config.metricsPort)
      app.log.info(`metrics at ${metricsListener.url}/metrics`)
    }
    address = await app.listen({ port: config.port, host: config.host })
  } catch (error) {
    // The token is stored already: a start that fails now must still show it, or it is lost.
    if (initialAdminToken !== undefined) announceInitialAdminToken(initialAdminToken, `http://${config.host}:${config.port}`)
    throw error
  }
  if (initialAdminToken !== undefined) announceInitialAdminToken(initialAdminToken, address)
  await announceReadiness(app, store, address)
}

/**
 * Says once that the service is ready (listening, and the store takes writes), or, while the store
 * cannot take writes yet, that it is not, and then once that it is.
 */
async function announceReadiness (app: FastifyInstance, store: PlantStore, address: string): Promise<void> {
  const ready = () => { app.log.info({ address, store: store.backend }, `ready: serving ${address}`) }
  try {
    await store.checkWritable()
    ready()
    return
  } catch (error) {
    app.log.warn({ address, store: store.backend }, `listening at ${address}, but not ready: ${(error as Error).message}; ` +
      '/readyz answers 503 until the store takes writes')
  }
  const check = setInterval(() => {
    if (!app.server.listening) {
      clearInterval(check)
      return
    }
    store.checkWritable().then(() => {
      clearInterval(check)
      ready()
    }, () => {})
  }, DATABASE_RETRY_MS)
  check.unref()
}

/**
 * Stops the start when neither WEBHOOK_SECRETS_KEY nor a previous key opens a stored signing secret (when
 * the store answers now), and says which secrets `plantstore webhooks reseal` would seal with the key.
 */
async function checkWebhookSecrets (store: PlantStore, box: SecretBox): Promise<void> {
  let stored
  try {
    stored = await store.webhooks.storedSecrets()
  } catch (error) {
    if (error instanceof StoreUnavailableError) return
    throw error
  }
  const { problem, unsealed, underPreviousKeys } = storedSecretsState(stored, box, Date.now())
  if (problem !== undefined) throw new StoreOpenError(problem)
  if (box.sealing && unsealed > 0) {
    process.stderr.write(`plantstore: ${unsealed} webhook signing secret(s) were stored before WEBHOOK_SECRETS_KEY was set and ` +
      'stay readable in the database; run plantstore webhooks reseal to seal them\n')
  }
  if (underPreviousKeys > 0) {
    process.stderr.write(`plantstore: ${underPreviousKeys} webhook signing secret(s) are sealed with a key of WEBHOOK_SECRETS_PREVIOUS_KEYS; ` +
      'once every instance runs with the new WEBHOOK_SECRETS_KEY, run plantstore webhooks reseal, then remove the previous keys\n')
  }
}

/**
 * Reads the stored tokens (and makes initial-admin on the first start). With PLANTSTORE_TOKENS entries
 * the service can work without the database's tokens, so a database that is down does not hold the
 * start: the poll reads the stored tokens once it answers. Without entries it waits for the database.
 */
async function loadAccessTokens (accessTokens: AccessTokenRegistry, log: Logger): Promise<{ readonly initialAdminToken?: string }> {
  if (!accessTokens.hasEnvironmentTokens) return untilStoreAnswers(() => accessTokens.load(), log)
  try {
    return await accessTokens.load()
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) throw error
    log.warn(`the database is unavailable (${error.message}); starting with the PLANTSTORE_TOKENS entries, and the stored tokens once it answers`)
    return {}
  }
}

/**
 * Retries `operation` every second while the store is unavailable (a database still starting). The wait
 * is logged when it begins and then every 30 s, and its end once.
 */
async function untilStoreAnswers<T> (operation: () => Promise<T>, log: Logger): Promise<T> {
  const started = performance.now()
  let loggedAt: number | undefined
  for (;;) {
    try {
      const result = await operation()
      if (loggedAt !== undefined) log.info({ waitedSeconds: Math.round((performance.now() - started) / 1000) }, 'the database answers')
      return result
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error
      const now = performance.now()
      if (loggedAt === undefined || now - loggedAt >= DATABASE_WAIT_LOG_MS) {
        log.warn({ waitedSeconds: Math.round((now - started) / 1000) }, `waiting for the database (${error.message}); trying again every second`)
        loggedAt = now
      }
      await sleep(DATABASE_RETRY_MS)
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
      if (tokens.length === 0) app.log.warn('SIGHUP: the token file holds no token now; only the stored tokens are accepted')
      else app.log.info({ tokens: tokens.map((token) => token.name) }, 'SIGHUP: token file read again')
    } catch (error) {
      app.log.error(`SIGHUP: the token file was not loaded, the tokens in use stay: ${(error as Error).message}`)
    }
  }
  process.on('SIGHUP', reload)
}

/** Scrapes keep working while requests drain; the metrics listener closes last. The last line says the process stopped. */
function stopGracefullyOnSignals (app: FastifyInstance, metricsListener: () => MetricsListener | undefined, processLog: Logger): void {
  const stop = (signal: NodeJS.Signals) => {
    const started = performance.now()
    app.log.info({ signal }, 'stopping: finishing in-flight requests')
    setTimeout(() => {
      processLog.error({ signal }, `graceful stop took longer than ${SHUTDOWN_DEADLINE_MS / 1000} s; exiting`)
      process.exit(1)
    }, SHUTDOWN_DEADLINE_MS).unref()
    setTimeout(() => {
      app.log.warn({ signal }, `connections still open after ${DRAIN_MS / 1000} s of stopping are closed`)
      app.server.closeAllConnections()
    }, DRAIN_MS).unref()
    app.close().then(
      () => {
        process.exitCode = 0
        processLog.info({ signal, seconds: Number(((performance.now() - started) / 1000).toFixed(3)) }, 'stopped')
      },
      (error: unknown) => {
        processLog.error({ err: error }, 'error while stopping')
        process.exitCode = 1
      })
      .finally(() => metricsListener()?.close())
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
  if (error instanceof MetricsListenerError) return [error.message]
  return [String(error)]
}

main().catch((error: unknown) => {
  process.stderr.write(reasonsNotToStart(error).map((reason) => `plantstore could not start: ${reason}\n`).join(''))
  process.exit(1)
})
