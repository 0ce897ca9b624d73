import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { expect, onTestFinished } from 'vitest'
import type { KeySetTimings } from '../../src/auth/jwt/issuer-keys.js'
import { JwtAccessTokens } from '../../src/auth/jwt/jwt-access-tokens.js'
import type { LogLevel } from '../../src/config.js'
import type { PlantStore } from '../../src/store/plant-store.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { startIdentityProvider, type IdentityProvider, type IdentityProviderOptions, type PublishedKey } from '../helpers/identity-provider.js'
import { jwtSettingsFor } from '../helpers/jwt-service.js'
import { CAPTURED_LOG_LEVEL } from '../helpers/log-capture.js'
import { collectingStream } from '../helpers/log-lines.js'

export { sleep }

/** The key set's timings in these tests: the documented 5 s, 30 s and 10 min, shortened. */
export const TIMINGS: KeySetTimings = Object.freeze({ fetchTimeoutMs: 400, refetchCooldownMs: 300, refreshMs: 600_000 })

/** What a request may take beyond the fetch time-out on a loaded 2-core machine. */
export const MARGIN_MS = 600

/** A key-set line of the log: its pino level and message, and the issuer it names. */
export interface KeySetLogLine {
  readonly level: number
  readonly msg: string
  readonly issuer: unknown
}

export const WARN = 40
export const INFO = 30

export const RECOVERED = 'the identity provider\'s keys are fetched again'

/** The warn line of a failing streak's first fetch, for the reason IssuerKeys gives. */
export function fetchFailedMessage (reason: string): string {
  return `cannot fetch the identity provider's keys (${reason}); JWTs signed with keys fetched before keep working, and service tokens are unaffected`
}

/** An identity provider on 127.0.0.1, closed when the test ends. */
export async function provider (keys: readonly PublishedKey[], options: Omit<IdentityProviderOptions, 'keys'> = {}): Promise<IdentityProvider> {
  const idp = await startIdentityProvider({ keys, ...options })
  onTestFinished(() => idp.close())
  return idp
}

export interface JwtApp {
  readonly app: FastifyInstance
  /** The lines about the identity provider's keys logged so far, in order. */
  readonly keySetLines: () => KeySetLogLine[]
  /** When each of those lines was logged (pino's `time`, a Date.now()), in the same order. */
  readonly keySetLineTimes: () => number[]
  /** The first verifications so far, by outcome (what `plantstore_jwt_verifications_total` counts). */
  readonly verifications: { accepted: number, refused: number }
}

/**
 * The app with service tokens (TEST_TOKEN) and JWTs from `idp` (audience TEST_AUDIENCE, keys by discovery
 * unless `jwksUrl`), its log captured (and also handed to test:secrets' capture when that runs).
 */
export async function startJwtApp (
  idp: Pick<IdentityProvider, 'issuer'>,
  options: { readonly timings?: Partial<KeySetTimings>, readonly jwksUrl?: string, readonly store?: PlantStore } = {}
): Promise<JwtApp> {
  const settings = jwtSettingsFor(idp, { jwksUrl: options.jwksUrl })
  const log = collectingStream()
  const logLevel: LogLevel = CAPTURED_LOG_LEVEL === undefined ? 'info' : 'trace'
  const jwt = new JwtAccessTokens(settings, { ...TIMINGS, ...options.timings })
  const app = await buildTestApp({
    jwt,
    logStream: log.stream,
    config: { logLevel },
    ...(options.store === undefined ? {} : { store: options.store })
  })
  const keySetEntries = () => log.text().split('\n')
    .filter((line) => line.includes('identity provider\'s keys'))
    .map((line) => JSON.parse(line) as KeySetLogLine & { time: number })
  const keySetLines = (): KeySetLogLine[] => keySetEntries().map(({ level, msg, issuer }) => ({ level, msg, issuer }))
  const keySetLineTimes = (): number[] => keySetEntries().map(({ time }) => time)
  const verifications = { accepted: 0, refused: 0 }
  jwt.observer = { keySetFetched: () => {}, verified: (outcome) => { verifications[outcome]++ } }
  return { app, keySetLines, keySetLineTimes, verifications }
}

/** GET /plants with `token`: 200 when it is accepted with plants:read. */
export function getPlants (app: FastifyInstance, token: string): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'GET', url: '/plants', headers: bearer(token) })
}

/** Asserts the RFC 6750 refusal of a token: 401 invalid_token, whatever the reason. */
export function expectRefused (response: LightMyRequestResponse): void {
  expect({ status: response.statusCode, challenge: response.headers['www-authenticate'], body: response.json() }).toEqual({
    status: 401,
    challenge: expect.stringContaining('error="invalid_token"'),
    body: { error: 401, message: 'the bearer token is missing, malformed or not accepted' }
  })
}

/** Resolves with what `work` resolves with, how long it took, and when it ended (Date.now()). */
export async function timed<T> (work: Promise<T>): Promise<{ readonly value: T, readonly elapsedMs: number, readonly endedAt: number }> {
  const started = performance.now()
  const value = await work
  return { value, elapsedMs: performance.now() - started, endedAt: Date.now() }
}

/** Waits until `condition` holds, polling; fails after `timeoutMs`. */
export async function waitFor (condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`)
    await sleep(10)
  }
}

/** Waits until at least `ms` have passed since `sinceMs` (a Date.now()). */
export async function untilPast (sinceMs: number, ms: number): Promise<void> {
  const left = sinceMs + ms - Date.now()
  if (left > 0) await sleep(left)
}

/** When the provider last answered a request for either document (Date.now()). */
export function lastFetchAt (idp: IdentityProvider): number {
  return Math.max(...idp.fetches.discovery, ...idp.fetches.jwks)
}

/** How many requests each document received so far. */
export function fetchCounts (idp: IdentityProvider): { discovery: number, jwks: number } {
  return { discovery: idp.fetches.discovery.length, jwks: idp.fetches.jwks.length }
}

const FAILED_REASON = /^cannot fetch the identity provider's keys \((.+)\); JWTs signed/

/** `text` as a regular expression matching it literally. */
export function escaped (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
}

/** Asserts the warn line of a failing streak: its reason exactly (a string) or matching (a pattern, where the system words it). */
export function expectFailedLine (line: KeySetLogLine | undefined, idp: Pick<IdentityProvider, 'issuer'>, reason: string | RegExp): void {
  const shownReason = typeof reason === 'string' ? reason : FAILED_REASON.exec(line?.msg ?? '')?.[1] ?? ''
  expect(shownReason).toMatch(reason)
  expect(line).toEqual({ level: WARN, msg: fetchFailedMessage(shownReason), issuer: idp.issuer })
}
