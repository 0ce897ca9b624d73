import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { roundRatios, type Row, type Samples } from '../figures.js'
import { PRELOADED, type Harness, type Part } from '../harness.js'
import { AUDIENCE, IdentityProvider } from '../identity-provider.js'
import type { Target } from '../processes.js'
import { describeRounds, formatTable, generatorCell, ratioRange } from '../report.js'
import { FIRST_VERIFICATION_REFERENCE, measureFirstVerifications } from './jwt-first-verification.js'
import { measureTokenPair } from './paired-tokens.js'

const JWT_LOADS = ['post', 'get'] as const
const SERVICE_TOKEN_NAME = 'bench-token'
const SERVICE_TOKEN_TARGET = 'sqlite-service-token'
const JWT_TARGET = 'sqlite-jwt'
/** Issue 27's goal: a JWT the service has verified before costs at most 10 % more CPU a request than a service token. */
const JWT_CPU_GOAL = 1.1

/**
 * What JWT access tokens cost (issue 27): a repeated JWT against a service token on one SQLite service,
 * then the first verification of a token per algorithm (jwt-first-verification.ts), both against keys
 * the bench's own identity provider serves (bench/identity-provider.ts).
 */
export async function compareJwt (harness: Harness): Promise<Row[]> {
  const provider = await IdentityProvider.start()
  try {
    return [...await compareWithServiceToken(harness, provider), ...await measureFirstVerifications(harness, provider)]
  } finally {
    await provider.close()
  }
}

/**
 * Does a client repeating its JWT cost what a service token costs? One SQLite service accepts both (a
 * second process would add its own drift): a generated service token (`pst_` and 43 characters) from
 * `PLANTSTORE_TOKENS`, and an RS256 JWT with Keycloak's claims from the bench's provider (found by
 * OpenID Connect discovery), both with `plants:read plants:write`. POST and GET by id with each, in
 * interleaved rounds whose order alternates, one id sequence for both as in the tokens part. The JWT's
 * first request verifies its signature; every later one finds it remembered: the check before the
 * rounds and their unrecorded warm-up make that first one.
 */
async function compareWithServiceToken (harness: Harness, provider: IdentityProvider): Promise<Row[]> {
  const serviceToken = `pst_${randomBytes(32).toString('base64url')}`
  const service = await harness.servers.startService('jwt', `sqlite:${join(harness.workFolder, 'jwt.db')}`, {
    PLANTSTORE_TOKENS: `name=${SERVICE_TOKEN_NAME};${serviceToken}`,
    AUTH_JWT_ISSUER: provider.issuer,
    AUTH_JWT_AUDIENCE: AUDIENCE
  })
  const jwt = await provider.sign('RS256')
  const serviceTokenTarget: Target = { ...service, name: SERVICE_TOKEN_TARGET, token: serviceToken }
  const jwtTarget: Target = { ...service, name: JWT_TARGET, token: jwt }
  await harness.preload(serviceTokenTarget, PRELOADED)
  jwtTarget.preloadedIds = serviceTokenTarget.preloadedIds
  await checkJwtAccepted(service.url, jwt)
  const { rows, samples } = await measureTokenPair(harness, serviceTokenTarget, jwtTarget, JWT_LOADS)
  await harness.servers.stop(service)

  printJwtTable(harness, rows, samples, jwt.length, serviceToken.length)
  return rows
}

/** That the service verifies the bench's JWT: its first verification, before anything is measured. */
async function checkJwtAccepted (url: string, jwt: string): Promise<void> {
  const response = await fetch(`${url}/plants/1`, { headers: { authorization: `Bearer ${jwt}` } })
  if (response.status !== 200) throw new Error(`GET /plants/1 with the bench's JWT answered ${response.status}: ${await response.text()}`)
}

function printJwtTable (harness: Harness, rows: Row[], samples: Samples, jwtLength: number, serviceTokenLength: number): void {
  const title = { post: 'POST', get: 'GET by id' } as Record<string, string>
  const header = ['comparison', 'req/s token', 'req/s JWT', 'req/s ÷', 'µs/req token', 'µs/req JWT', 'CPU ÷',
    'per-round CPU ÷', 'p99 ms token/JWT', 'errors', `${harness.generator.name} CPU`, `CPU ÷ ≤ ${JWT_CPU_GOAL}`]
  const lines = JWT_LOADS.map((load) => {
    const token = rows.find((row) => row.target === SERVICE_TOKEN_TARGET && row.load === load) as Row
    const jwt = rows.find((row) => row.target === JWT_TARGET && row.load === load) as Row
    return [`${title[load] ?? load}, JWT ÷ service token`, String(token.rps), String(jwt.rps), jwt.ratio.toFixed(3),
      String(token.serverCpuUs), String(jwt.serverCpuUs), jwt.cpuRatio.toFixed(3),
      ratioRange(roundRatios(samples, `${JWT_TARGET}/${load}`, `${SERVICE_TOKEN_TARGET}/${load}`, 'serverCpuUs')),
      `${token.p99}/${jwt.p99}`, String(token.errors + jwt.errors),
      generatorCell(Math.max(token.generatorCpuShare, jwt.generatorCpuShare), token.valid && jwt.valid), jwt.cpuRatio <= JWT_CPU_GOAL ? 'yes' : 'no']
  })
  process.stdout.write(`\nSQLite, one service: a service token (PLANTSTORE_TOKENS, ${serviceTokenLength} characters) against a JWT ` +
    `(RS256, Keycloak's claims, ${jwtLength} characters, verified at its first request and remembered after); ` +
    `medians of ${describeRounds(harness.rounds, harness.durationSeconds)}, ratios JWT ÷ service token\n${formatTable(header, lines, 1)}\n`)
}

export const jwtPart: Part = {
  name: 'jwt',
  owns: (row) => row.against === SERVICE_TOKEN_TARGET || row.against === FIRST_VERIFICATION_REFERENCE,
  compare: compareJwt
}
