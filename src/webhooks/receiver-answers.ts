import { AnswerTooLate } from './receiver-post.js'

/** A 2xx within this of the request being written is success; anything slower is a failed attempt. */
export const DELIVERY_TIMEOUT_MS = 10_000

/** One line about why an attempt failed, for its record. */
export function describe (error: unknown): string {
  if (error instanceof Error) {
    if (error instanceof AnswerTooLate) return error.message
    if ((error as { code?: unknown }).code === 'UND_ERR_HEADERS_TIMEOUT') return `no answer within ${DELIVERY_TIMEOUT_MS / 1000} s`
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : ''
    const code = (error as { code?: unknown }).code
    return `${typeof code === 'string' ? `${code} ` : ''}${error.message}${cause}`.slice(0, 500)
  }
  return String(error).slice(0, 500)
}
