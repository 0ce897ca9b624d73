import { Writable } from 'node:stream'

/** A log destination that keeps what the app writes, and reads it back as parsed JSON lines. */
export function collectingStream (): { readonly stream: Writable, readonly text: () => string, readonly lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString())
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
