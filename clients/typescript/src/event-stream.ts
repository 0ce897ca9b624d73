export interface ServerSentEvent {
  readonly event: string
  readonly data: string
  readonly id: string | undefined
}

/**
 * The events of a `text/event-stream` body, as the HTML standard's parser reads them ("Server-sent
 * events", §9.2.6): lines end in CRLF, LF or CR; `data` lines join with LF; a blank line dispatches; an
 * event without data is dropped; comments are skipped. A `retry` field is handed to `onRetry`, in
 * milliseconds. Stopping the iteration cancels the body, and so ends the connection.
 */
export async function * serverSentEvents (body: ReadableStream<Uint8Array>, onRetry: (ms: number) => void = () => {}): AsyncGenerator<ServerSentEvent, void, undefined> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  let data: string[] = []
  let event = ''
  let id: string | undefined
  try {
    for (;;) {
      const { done, value } = await reader.read()
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true })
      let start = 0
      for (;;) {
        const end = lineEnd(buffer, start, done)
        if (end === undefined) break
        const line = buffer.slice(start, end)
        start = end + (buffer[end] === '\r' && buffer[end + 1] === '\n' ? 2 : 1)
        if (line === '') {
          if (data.length > 0) yield { event: event === '' ? 'message' : event, data: data.join('\n'), id }
          data = []
          event = ''
          continue
        }
        if (line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const field = colon === -1 ? line : line.slice(0, colon)
        const text = colon === -1 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1)
        if (field === 'data') data.push(text)
        else if (field === 'event') event = text
        else if (field === 'id' && !text.includes('\0')) id = text
        else if (field === 'retry' && /^\d+$/.test(text)) onRetry(Number(text))
      }
      buffer = buffer.slice(start)
      if (done) return
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}

/**
 * Where the line starting at `start` ends, or undefined while it is not complete yet. A CR last in the
 * buffer may be the first half of a CRLF, so it ends a line only once the stream is done.
 */
function lineEnd (buffer: string, start: number, done: boolean): number | undefined {
  for (let index = start; index < buffer.length; index++) {
    const char = buffer[index]
    if (char === '\n') return index
    if (char === '\r') return index + 1 < buffer.length || done ? index : undefined
  }
  return undefined
}
