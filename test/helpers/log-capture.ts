import { appendFileSync, mkdirSync } from 'node:fs'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'

/**
 * `npm run test:secrets` runs the whole suite with PLANTSTORE_TEST_LOG_LEVEL=trace: every app the tests
 * build, and every server process they start, then logs at that level into test-artifacts/logs/, which
 * scripts/check-logs-for-tokens.mjs searches for every token the tests use.
 */
export const CAPTURED_LOG_LEVEL = process.env.PLANTSTORE_TEST_LOG_LEVEL

const LOG_FOLDER = fileURLToPath(new URL('../../test-artifacts/logs/', import.meta.url))

export function appendCapturedLog (text: string): void {
  if (CAPTURED_LOG_LEVEL === undefined || text === '') return
  mkdirSync(LOG_FOLDER, { recursive: true })
  appendFileSync(`${LOG_FOLDER}${process.pid}.log`, text)
}

export function capturedLogStream (): Writable {
  return new Writable({
    write (chunk: Buffer, _encoding, callback) {
      appendCapturedLog(chunk.toString())
      callback()
    }
  })
}
