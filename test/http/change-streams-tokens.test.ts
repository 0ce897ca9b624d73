/**
 * A stream's token is asked about for as long as the stream is open: an entry of the token file replaced
 * under the same place ends the streams of the token it replaced. And a filtered stream's keep-alive
 * carries the seq it has read up to, so its client's resume point keeps up with the log.
 */
import { describe, expect, it, onTestFinished } from 'vitest'
import { buildApp } from '../../src/app.js'
import { AccessTokenRegistry } from '../../src/auth/token-registry.js'
import { parseTokenList } from '../../src/auth/tokens.js'
import { DEFAULT_CHANGES_CONFIG } from '../../src/config.js'
import { openMemoryStore } from '../../src/store/memory/store.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { changeHead, openLiveStream, putPlant } from '../helpers/change-streams.js'

const FIRST = 'change-streams-first-token-4b1e9a'
const SECOND = 'change-streams-second-token-9c2d7f'

describe('Change streams and the token file', () => {
  it('given a stream of the first of two unnamed token-file entries, when the file loses that entry (the second takes its place), then the stream ends within 2 s and the token opens no other', async () => {
    const store = openMemoryStore()
    const accessTokens = new AccessTokenRegistry(store.tokens, parseTokenList(`${FIRST},${SECOND}`))
    await accessTokens.refresh()
    const app = await buildApp({ bodyLimit: 16384, logLevel: 'silent', prettyLogs: false }, { store, accessTokens })
    onTestFinished(() => app.close())
    const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })
    const first = await openLiveStream(baseUrl, '', bearer(FIRST))

    const replacedAt = Date.now()
    accessTokens.replaceEnvironment(parseTokenList(SECOND))
    const ended = await first.ended

    expect(ended.how).toBe('end')
    expect(ended.wallMs - replacedAt).toBeLessThan(2000)
    expect((await app.inject({ url: '/plants/changes', headers: bearer(FIRST) })).statusCode).toBe(401)
    const second = await openLiveStream(baseUrl, '', bearer(SECOND))
    const written = await app.inject({ method: 'PUT', url: '/plants/1', headers: { ...bearer(SECOND), 'content-type': 'application/json' }, payload: { name: 'Seen by the second' } })
    expect(written.statusCode).toBe(201)
    await second.waitForEvents(1)
  })

  it('given a stream of one tag, when only other tags change, then its keep-alive carries the seq it has read up to as an event id without data', async () => {
    const app = await buildTestApp({ config: { changes: { ...DEFAULT_CHANGES_CONFIG, keepAliveMs: 300 } } })
    const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })
    const stream = await openLiveStream(baseUrl, '?tag=rare')

    await putPlant(app, 1, { name: 'Common', tag: 'common' })
    await putPlant(app, 2, { name: 'Common too', tag: 'common' })
    const head = await changeHead(app)
    await stream.waitFor('a keep-alive naming the head', () => stream.text().includes(`: keep-alive\nid: ${head}\n\n`), 10_000)

    expect(stream.events).toEqual([])
  })
})
