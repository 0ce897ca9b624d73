import { appendFileSync, mkdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { CAPTURED_LOG_LEVEL } from './log-capture.js'

/**
 * Where `npm run test:secrets` (PLANTSTORE_TEST_LOG_LEVEL set) finds every JWT and JWT-like token the
 * test helpers made, one per line in a file per process, to search the captured logs for each of them:
 * they are made at run time, so no string literal in test/ names them.
 */
export const ISSUED_TOKENS_FOLDER = fileURLToPath(new URL('../../test-artifacts/jwts/', import.meta.url))

/** Notes `token` for that search when the logs are captured; returns it. */
export function recordIssuedToken (token: string): string {
  if (CAPTURED_LOG_LEVEL === undefined) return token
  mkdirSync(ISSUED_TOKENS_FOLDER, { recursive: true })
  appendFileSync(`${ISSUED_TOKENS_FOLDER}${process.pid}.txt`, `${token}\n`)
  return token
}
