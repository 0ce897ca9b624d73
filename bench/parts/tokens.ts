import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { roundRatios, type Row, type Samples } from '../figures.js'
import { PRELOADED, type Harness, type Part } from '../harness.js'
import { TOKEN, type Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'
import { measureTokenPair } from './paired-tokens.js'

/** The names of the token comparison's two plant tokens: equally long, so their log lines are too. */
const ENVIRONMENT_TOKEN_NAME = 'bench-token'
const STORE_TOKEN_NAME = 'bench-store'
const TOKEN_LOADS = ['post', 'get'] as const
const ENVIRONMENT_TARGET = 'sqlite-environment-token'
const STORE_TARGET = 'sqlite-store-token'
/** The bound: a store token's figures within 3 % of an environment token's. */
const TOKEN_TOLERANCE = 0.03

/**
 * Is a token kept in the store as cheap as one from `PLANTSTORE_TOKENS`? One SQLite service accepts
 * both (a second process would add its own drift to a 3 % question): `bench-token` from the
 * environment (`bench-token_` and random characters, as long as a generated token), and
 * `bench-store`, made with an admin entry of `PLANTSTORE_TOKENS` through
 * `POST /admin/tokens`, both with `plants:read plants:write`. The two are measured in interleaved
 * rounds like the backends, POST and GET by id; within a round their order alternates, so that a
 * drift within a round does not always favour the same one. The database is shared, so both POST
 * into the same growing table: the alternation spreads that too.
 */
export async function compareTokens (harness: Harness): Promise<Row[]> {
  const adminToken = `pst_${randomBytes(32).toString('base64url')}`
  // As long as a generated token (`pst_` and 43 characters): the header, its b64token check and the
  // hash of the remembered-token lookup cost by the character, and the rows compare sources, not lengths.
  const environmentToken = `${TOKEN}_${randomBytes(32).toString('base64url')}`.slice(0, 47)
  const service = await harness.servers.startService('tokens', `sqlite:${join(harness.workFolder, 'tokens.db')}`, {
    PLANTSTORE_TOKENS: `name=${ENVIRONMENT_TOKEN_NAME};${environmentToken},name=bench-admin;scopes=admin;${adminToken}`
  })
  const storeToken = await createStoreToken(service.url, adminToken)
  if (storeToken.length !== environmentToken.length) throw new Error(`the store token has ${storeToken.length} characters, the environment token ${environmentToken.length}`)
  const environment: Target = { ...service, name: ENVIRONMENT_TARGET, token: environmentToken }
  const store: Target = { ...service, name: STORE_TARGET, token: storeToken }
  await harness.preload(environment, PRELOADED)
  store.preloadedIds = environment.preloadedIds
  await checkTokenSources(service.url, adminToken, storeToken)
  const { rows, samples } = await measureTokenPair(harness, environment, store, TOKEN_LOADS)
  await harness.servers.stop(service)

  printTokenTable(harness, rows, samples)
  return rows
}

async function createStoreToken (url: string, adminToken: string): Promise<string> {
  const response = await fetch(`${url}/admin/tokens`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: STORE_TOKEN_NAME, scopes: ['plants:read', 'plants:write'] })
  })
  const body = await response.text()
  if (response.status !== 201) throw new Error(`POST /admin/tokens answered ${response.status}: ${body}`)
  return (JSON.parse(body) as { token: string }).token
}

/** That the two tokens are what the rows say: one of each source, same scopes, and the store's accepted. */
async function checkTokenSources (url: string, adminToken: string, storeToken: string): Promise<void> {
  const response = await fetch(`${url}/admin/tokens`, { headers: { authorization: `Bearer ${adminToken}` } })
  const tokens = await response.json() as Array<{ name: string, source: string, scopes: string[] }>
  const source = (name: string) => tokens.find((token) => token.name === name)
  const scopesOf = (name: string) => [...source(name)?.scopes ?? []].sort().join(' ')
  if (source(ENVIRONMENT_TOKEN_NAME)?.source !== 'environment' || source(STORE_TOKEN_NAME)?.source !== 'store' ||
    scopesOf(ENVIRONMENT_TOKEN_NAME) !== scopesOf(STORE_TOKEN_NAME)) {
    throw new Error(`GET /admin/tokens does not show one environment and one store token with the same scopes: ${JSON.stringify(tokens)}`)
  }
  const read = await fetch(`${url}/plants/1`, { headers: { authorization: `Bearer ${storeToken}` } })
  if (read.status !== 200) throw new Error(`GET /plants/1 with the store token answered ${read.status}`)
}

export function printTokenTable (harness: Harness, rows: Row[], samples: Samples): void {
  const title = { post: 'POST', get: 'GET by id' } as Record<string, string>
  const header = ['comparison', 'req/s env', 'req/s store', 'req/s ÷', 'µs/req env', 'µs/req store', 'CPU ÷',
    'per-round req/s ÷', 'per-round CPU ÷', 'p99 ms env/store', 'errors', `${harness.generator.name} CPU`, `within ${TOKEN_TOLERANCE * 100} %`]
  const lines = TOKEN_LOADS.map((load) => {
    const environment = rows.find((row) => row.target === ENVIRONMENT_TARGET && row.load === load) as Row
    const store = rows.find((row) => row.target === STORE_TARGET && row.load === load) as Row
    // Paired by round: how much of the median ratio is noise.
    const perRound = (measure: 'rps' | 'serverCpuUs') => ratioRange(roundRatios(samples, `${STORE_TARGET}/${load}`, `${ENVIRONMENT_TARGET}/${load}`, measure))
    const within = Math.abs(store.ratio - 1) <= TOKEN_TOLERANCE && Math.abs(store.cpuRatio - 1) <= TOKEN_TOLERANCE
    return [`${title[load] ?? load}, store token ÷ environment token`, String(environment.rps), String(store.rps), store.ratio.toFixed(3),
      String(environment.serverCpuUs), String(store.serverCpuUs), store.cpuRatio.toFixed(3),
      perRound('rps'), perRound('serverCpuUs'), `${environment.p99}/${store.p99}`,
      String(environment.errors + store.errors),
      generatorCell(Math.max(environment.generatorCpuShare, store.generatorCpuShare), environment.valid && store.valid), within ? 'yes' : 'no']
  })
  process.stdout.write(`\nSQLite, one service, token ${ENVIRONMENT_TOKEN_NAME} (PLANTSTORE_TOKENS) against ${STORE_TOKEN_NAME} (POST /admin/tokens), both 47 characters; ` +
    `medians of ${describeRounds(harness.rounds, harness.durationSeconds)}, ratios store ÷ environment\n${formatTable(header, lines, 1)}\n`)
}

export const tokensPart: Part = {
  name: 'tokens',
  owns: (row) => row.against === ENVIRONMENT_TARGET,
  compare: compareTokens
}
