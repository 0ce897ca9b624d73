import { Writable } from 'node:stream'
import { appendCapturedLog } from './log-capture.js'

/** What a collecting stream gives: the stream for the app, and what was written to it. */
export interface CollectedLog {
  readonly stream: Writable
  readonly text: () => string
  readonly lines: () => Array<Record<string, unknown>>
}

/**
 * A log destination that keeps what the app writes, and reads it back as parsed JSON lines; what it gets
 * also goes to the captured logs `test:secrets` searches.
 */
export function collectingStream (): CollectedLog {
  const chunks: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString())
      appendCapturedLog(chunk.toString())
      callback()
    }
  })
  const text = () => chunks.join('')
  return {
    stream,
    text,
    lines: () => text().split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>)
  }
}
