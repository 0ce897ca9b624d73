import type { Readable } from 'node:stream'

/** A 2xx within this is success; anything slower is a failed attempt. */
export const DELIVERY_TIMEOUT_MS = 10_000

/**
 * Reads and drops a response body, so its connection can serve the next delivery, unless it is longer
 * than `limit` or still arriving at `deadline`: then the connection is closed instead.
 */
export async function readAtMost (body: Readable, limit: number, deadline: number): Promise<void> {
  let read = 0
  for await (const chunk of body) {
    read += (chunk as Buffer).length
    if (read > limit || Date.now() > deadline) {
      body.destroy()
      return
    }
  }
}

/** One line about why an attempt failed, for its record. */
export function describe (error: unknown): string {
  if (error instanceof Error) {
    if ((error as { code?: unknown }).code === 'UND_ERR_HEADERS_TIMEOUT') return `no answer within ${DELIVERY_TIMEOUT_MS / 1000} s`
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : ''
    const code = (error as { code?: unknown }).code
    return `${typeof code === 'string' ? `${code} ` : ''}${error.message}${cause}`.slice(0, 500)
  }
  return String(error).slice(0, 500)
}
