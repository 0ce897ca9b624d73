import { describe, expect, it } from 'vitest'
import { serverSentEvents, type ServerSentEvent } from '../../clients/typescript/src/event-stream.js'

function streamOf (chunks: ReadonlyArray<string | Uint8Array>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  return new ReadableStream({
    start (controller) {
      for (const chunk of chunks) controller.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : chunk)
      controller.close()
    }
  })
}

async function eventsOf (chunks: ReadonlyArray<string | Uint8Array>, retries: number[] = []): Promise<ServerSentEvent[]> {
  const events: ServerSentEvent[] = []
  for await (const event of serverSentEvents(streamOf(chunks), (ms) => retries.push(ms))) events.push(event)
  return events
}

describe('Reading a text/event-stream body', () => {
  it('reads events with LF, CRLF and CR line ends, comments, multi-line data and an id', async () => {
    const retries: number[] = []
    const events = await eventsOf([
      ': a comment\n\nid: 7\nevent: plant.created\ndata: {"seq":7}\n\n',
      'data: first\r\ndata:second\r\n\r\n',
      'retry: 1500\rdata: third\r\r'
    ], retries)
    expect(events).toEqual([
      { event: 'plant.created', data: '{"seq":7}', id: '7' },
      { event: 'message', data: 'first\nsecond', id: '7' },
      { event: 'message', data: 'third', id: '7' }
    ])
    expect(retries).toEqual([1500])
  })

  it('joins lines split anywhere across chunks, a CRLF and a multi-byte character included', async () => {
    const bytes = new TextEncoder().encode('data: Straße 🌿\r\n\r\ndata: next\n\n')
    const chunks = Array.from(bytes, (byte) => Uint8Array.of(byte))
    expect(await eventsOf(chunks)).toEqual([
      { event: 'message', data: 'Straße 🌿', id: undefined },
      { event: 'message', data: 'next', id: undefined }
    ])
  })

  it('drops events without data, and an event the stream ends in the middle of', async () => {
    expect(await eventsOf(['event: ping\n\n', 'id: 3\n\n', 'data: complete\n\n', 'data: cut off\n'])).toEqual([
      { event: 'message', data: 'complete', id: '3' }
    ])
  })
})
