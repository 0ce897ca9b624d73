/**
 * The event-stream reader the change-stream tests rely on parses as an EventSource does (W3C HTML,
 * "Server-sent events", §9.2.6), the specification's own examples included.
 */
import { describe, expect, it } from 'vitest'
import { EventStreamParser } from './event-stream.js'

function parse (...chunks: string[]): EventStreamParser {
  const parser = new EventStreamParser()
  for (const chunk of chunks) parser.push(chunk)
  return parser
}

describe('The event-stream parser of the tests', () => {
  it('given data lines, when a blank line follows, then they are one message joined by LF', () => {
    expect(parse('data: YHOO\ndata: +2\ndata: 10\n\n').events).toEqual([{ type: 'message', data: 'YHOO\n+2\n10', lastEventId: '' }])
  })

  it('given comments, ids and values with and without a space, when parsed, then one leading space is dropped and ids carry over', () => {
    const parser = parse(': test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n')
    expect(parser.events).toEqual([
      { type: 'message', data: 'first event', lastEventId: '1' },
      { type: 'message', data: 'second event', lastEventId: '' },
      { type: 'message', data: ' third event', lastEventId: '' }
    ])
    expect(parser.comments).toEqual([' test stream'])
  })

  it('given empty data fields and a last event without its blank line, when parsed, then empty data dispatches and the unfinished event does not', () => {
    expect(parse('data\n\ndata\ndata\n\ndata:').events.map((event) => event.data)).toEqual(['', '\n'])
  })

  it('given CR, CRLF and LF line ends split across chunks and a BOM, when parsed, then each ends one line', () => {
    const parser = parse('\uFEFFevent: add\r', '\ndata: x\r', '\r', 'id: 7\ndata: y\n', '\n')
    expect(parser.events).toEqual([{ type: 'add', data: 'x', lastEventId: '' }, { type: 'message', data: 'y', lastEventId: '7' }])
  })

  it('given retry and id fields, when a retry is not all digits or an id holds NULL, then each is ignored', () => {
    const parser = parse('retry: 2000\n\nretry: 3s\nid: 5\n\nid: a\0b\ndata: z\n\nevent: only\n\n')
    expect(parser.retry).toBe(2000)
    expect(parser.events).toEqual([{ type: 'message', data: 'z', lastEventId: '5' }])
  })

  it('given a multi-byte name, when parsed, then it is kept as text', () => {
    expect(parse('id: 1\nevent: plant.created\ndata: {"name":"🌿 Fern"}\n\n').events)
      .toEqual([{ type: 'plant.created', data: '{"name":"🌿 Fern"}', lastEventId: '1' }])
  })
})
