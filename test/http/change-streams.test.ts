/**
 * GET /plants/changes as a live stream (Server-Sent Events) on every backend, over real sockets: where it
 * starts (the head, `after`, `Last-Event-ID`), a backlog caught up while writes go on with every change
 * exactly once and in order, the `tag` and `type` filters, and the exact text and headers of the answer.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { backends, sharedTestApp } from '../helpers/app.js'
import { changeHead, deletePlant, feedAfter, openLiveStream, putPlant, writeBatch } from '../helpers/change-streams.js'
import { seqsOf, type ServerSentEvent } from '../helpers/event-stream.js'

const range = (from: number, count: number) => Array.from({ length: count }, (_, index) => from + index)

/** The change of an event, parsed. */
const changeOf = (event: ServerSentEvent) => JSON.parse(event.data) as { seq: number, type: string, id: number, plant?: { name: string, tag?: string } }

describe.each(backends)('The change stream on $name', (backend) => {
  const app = sharedTestApp(backend)
  let baseUrl = ''
  beforeAll(async () => {
    baseUrl = await app().listen({ host: '127.0.0.1', port: 0 })
  })

  it('given a plant created while a stream is open, then the stream is 200 text/event-stream, no-store, and the event is exactly id, event and data of the change', async () => {
    const stream = await openLiveStream(baseUrl)
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8')
    expect(stream.headers['cache-control']).toBe('no-store')

    await putPlant(app(), '9007199254740993', { name: 'Exact fern', tag: 'exact' })

    const [event] = await stream.waitForEvents(1)
    const seq = Number(event?.lastEventId)
    const [change] = await feedAfter(app(), seq - 1)
    expect(change?.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    const data = `{"seq":${seq},"type":"plant.created","id":9007199254740993,"plant":{"id":9007199254740993,"name":"Exact fern","tag":"exact"},"at":"${change?.at}"}`
    expect(stream.text()).toBe(`retry: 2000\n\nid: ${seq}\nevent: plant.created\ndata: ${data}\n\n`)
    expect(change?.text).toBe(data)
  })

  it('given changes made before it opened, when a stream opens without after, then it gets only the changes made after (it starts at the head)', async () => {
    await writeBatch(app(), range(100, 3).map((id) => ({ method: 'PUT', id, body: { name: `before ${id}` } })))
    const head = await changeHead(app())

    const stream = await openLiveStream(baseUrl)
    await putPlant(app(), 103, { name: 'after the open' })

    const events = await stream.waitForEvents(1)
    expect(seqsOf(events)).toEqual([head + 1])
    expect(changeOf(events[0] as ServerSentEvent)).toMatchObject({ type: 'plant.created', id: 103 })
  })

  it('given a backlog of several pages, when a stream opens after its start while writes go on, then it gets every change after that start exactly once, in order, as the feed has them', async () => {
    const start = await changeHead(app())
    // 2100 changes: more than two of the pages a catching-up stream reads (1000 each).
    for (let batch = 0; batch < 3; batch++) {
      await writeBatch(app(), range(1000, 700).map((id) => ({ method: 'PUT', id, body: { name: `backlog ${batch} of ${id}` } })))
    }
    const writing = { on: true }
    let written = 0
    const writer = (async () => {
      // Writes go on while the stream catches up and after it is live: single writes and small batches.
      while (writing.on || written < 60) {
        if (written % 3 === 0) await writeBatch(app(), range(2000 + written, 5).map((id) => ({ method: 'PUT', id, body: { name: `concurrent ${id}` } })))
        else await putPlant(app(), 3000 + written, { name: `concurrent single ${written}` })
        written++
      }
    })()

    const stopWriting = async () => {
      writing.on = false
      await writer
    }
    try {
      const stream = await openLiveStream(baseUrl, `?after=${start}`)
      await stream.waitForEvents(2100, 30_000)
      await stopWriting()
      const head = await changeHead(app())
      await stream.waitFor(`the event of seq ${head}`, () => stream.events.at(-1)?.lastEventId === String(head), 20_000)

      const feed = await feedAfter(app(), start)
      expect(feed.at(-1)?.seq).toBe(head)
      expect(seqsOf(stream.events)).toEqual(feed.map((change) => change.seq))
      expect(seqsOf(stream.events)).toEqual(range(start + 1, head - start))
      expect(stream.events.map((event) => event.data)).toEqual(feed.map((change) => change.text))
      expect(stream.events.map((event) => event.type)).toEqual(feed.map((change) => change.type))
    } finally {
      await stopWriting()
    }
  })

  it('given both Last-Event-ID and after, when the stream opens, then it starts after Last-Event-ID', async () => {
    const start = await changeHead(app())
    await writeBatch(app(), range(200, 3).map((id) => ({ method: 'PUT', id, body: { name: `resume ${id}` } })))

    const stream = await openLiveStream(baseUrl, `?after=${start}`, { 'last-event-id': String(start + 2) })
    await putPlant(app(), 203, { name: 'resume live' })

    const events = await stream.waitForEvents(2)
    expect(seqsOf(events)).toEqual([start + 3, start + 4])
    expect(events.map((event) => changeOf(event).id)).toEqual([202, 203])
  })

  it('given tag and type filters, when plants enter, change in and leave the tag, then the tag stream shows them leaving and the type stream only its types, caught up or live alike', async () => {
    const tag = `streamed-${backend.name}`
    const start = await changeHead(app())
    const liveByTag = await openLiveStream(baseUrl, `?tag=${tag}`)
    const liveByType = await openLiveStream(baseUrl, '?type=plant.created,plant.deleted')
    const liveUpdatesOfTag = await openLiveStream(baseUrl, `?tag=${tag}&type=plant.updated`)

    await putPlant(app(), 300, { name: 'Tagged', tag })
    await putPlant(app(), 301, { name: 'Untagged' })
    await putPlant(app(), 300, { name: 'Tagged, renamed', tag })
    await putPlant(app(), 300, { name: 'Tagged, renamed', tag: 'elsewhere' })
    await putPlant(app(), 300, { name: 'Gone elsewhere', tag: 'elsewhere' })
    await putPlant(app(), 301, { name: 'Joins', tag })
    await deletePlant(app(), 301)
    const head = await changeHead(app())
    expect(head).toBe(start + 7)

    const expectedByTag = [
      { seq: start + 1, type: 'plant.created', id: 300 },
      { seq: start + 3, type: 'plant.updated', id: 300 },
      { seq: start + 4, type: 'plant.updated', id: 300, plant: { tag: 'elsewhere' } },
      { seq: start + 6, type: 'plant.updated', id: 301 },
      { seq: start + 7, type: 'plant.deleted', id: 301 }
    ]
    const expectedByType = [
      { seq: start + 1, type: 'plant.created', id: 300 },
      { seq: start + 2, type: 'plant.created', id: 301 },
      { seq: start + 7, type: 'plant.deleted', id: 301 }
    ]
    const expectedUpdatesOfTag = expectedByTag.filter((change) => change.type === 'plant.updated')
    const caughtUpByTag = await openLiveStream(baseUrl, `?tag=${tag}&after=${start}`)
    const caughtUpByType = await openLiveStream(baseUrl, `?type=plant.created,plant.deleted&after=${start}`)
    const caughtUpUpdatesOfTag = await openLiveStream(baseUrl, `?tag=${tag}&type=plant.updated&after=${start}`)
    for (const [stream, expected] of [
      [liveByTag, expectedByTag], [caughtUpByTag, expectedByTag],
      [liveByType, expectedByType], [caughtUpByType, expectedByType],
      [liveUpdatesOfTag, expectedUpdatesOfTag], [caughtUpUpdatesOfTag, expectedUpdatesOfTag]
    ] as const) {
      const events = await stream.waitForEvents(expected.length)
      expect(events.map(changeOf)).toMatchObject(expected)
      expect(events.map((event) => event.type)).toEqual(expected.map((change) => change.type))
    }
    // Nothing else arrives: the next change that passes the filters comes right after those.
    await putPlant(app(), 302, { name: 'Last', tag })
    for (const [stream, expected] of [[liveByTag, expectedByTag], [caughtUpByTag, expectedByTag], [liveByType, expectedByType], [caughtUpByType, expectedByType]] as const) {
      await stream.waitForEvents(expected.length + 1)
      expect(seqsOf(stream.events)).toEqual([...expected.map((change) => change.seq), head + 1])
    }
    expect(seqsOf(liveUpdatesOfTag.events)).toEqual(expectedUpdatesOfTag.map((change) => change.seq))
  })
})
