import { isUtf8 } from 'node:buffer'

/** The longest line an import reads; a plant's document is at most a few KiB even with every character escaped. */
export const MAX_LINE_BYTES = 64 * 1024

export type NdjsonLine =
  | { readonly number: number, readonly text: string }
  /** A line that cannot be a document: too long, or not UTF-8. Its bytes were not kept. */
  | { readonly number: number, readonly unreadable: string }

const LINE_FEED = 0x0a
const CARRIAGE_RETURN = 0x0d
const BYTE_ORDER_MARK = Buffer.from([0xef, 0xbb, 0xbf])

/**
 * The lines of an NDJSON stream, numbered from 1 as an editor shows them, in constant memory: no line
 * longer than MAX_LINE_BYTES is held. A line may end in `\r\n`; a byte order mark before the first
 * line is skipped; blank lines (nothing but spaces and tabs) are skipped, counted all the same; the last
 * line may lack its line feed.
 */
export async function * ndjsonLines (input: AsyncIterable<Buffer | string>): AsyncGenerator<NdjsonLine, void, undefined> {
  let number = 0
  let pending: Buffer[] = []
  let pendingBytes = 0
  let tooLong = false

  const finishLine = function * (): Generator<NdjsonLine> {
    number++
    let bytes = pending.length === 1 ? pending[0] as Buffer : Buffer.concat(pending, pendingBytes)
    pending = []
    pendingBytes = 0
    if (tooLong) {
      tooLong = false
      yield { number, unreadable: `the line is longer than ${MAX_LINE_BYTES} bytes` }
      return
    }
    if (number === 1 && bytes.subarray(0, 3).equals(BYTE_ORDER_MARK)) bytes = bytes.subarray(3)
    if (bytes.at(-1) === CARRIAGE_RETURN) bytes = bytes.subarray(0, -1)
    if (!isUtf8(bytes)) {
      yield { number, unreadable: 'the line is not valid UTF-8' }
      return
    }
    const text = bytes.toString('utf8')
    if (text.trim() === '') return
    yield { number, text }
  }

  const keep = (bytes: Buffer): void => {
    if (tooLong || bytes.length === 0) return
    if (pendingBytes + bytes.length > MAX_LINE_BYTES + 2) {
      tooLong = true
      pending = []
      pendingBytes = 0
      return
    }
    pending.push(bytes)
    pendingBytes += bytes.length
  }

  for await (const chunk of input) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    let start = 0
    for (let end = bytes.indexOf(LINE_FEED); end !== -1; end = bytes.indexOf(LINE_FEED, start)) {
      keep(bytes.subarray(start, end))
      yield * finishLine()
      start = end + 1
    }
    keep(bytes.subarray(start))
  }
  if (pendingBytes > 0 || tooLong) yield * finishLine()
}
