import { Agent } from 'undici'
import { describe, expect, it, onTestFinished } from 'vitest'
import { AnswerTooLate, ReceiverPosts } from '../../src/webhooks/receiver-post.js'
import { listenOnLoopback, serverOfWholeRequests } from '../helpers/test-servers.js'

// One delivery's POST against a real receiver, with the agent's own headersTimeout far away: a status
// that arrives after the POST's time-out is a failure, however undici's coarse timers would have it.

/** A receiver on 127.0.0.1 answering `status` after the delay its request's `x-delay-ms` header names. */
async function slowReceiver (status: number): Promise<string> {
  const server = serverOfWholeRequests((request, _body, response) => {
    setTimeout(() => { response.writeHead(status).end() }, Number(request.headers['x-delay-ms']))
  })
  const port = await listenOnLoopback(server)
  return `http://127.0.0.1:${port}`
}

function postsThroughAgent (): ReceiverPosts {
  const agent = new Agent({ headersTimeout: 10_000, bodyTimeout: 10_000 })
  onTestFinished(() => agent.destroy())
  return new ReceiverPosts(async () => agent)
}

const postTo = (posts: ReceiverPosts, origin: string, delayMs: number, timeoutMs: number) =>
  posts.post({ origin, path: '/hooks', headers: ['content-type', 'application/json', 'x-delay-ms', String(delayMs)], body: '{}', timeoutMs })

describe('a delivery\'s POST', () => {
  it('resolves with the status that arrives within its time-out', async () => {
    const origin = await slowReceiver(204)

    expect(await postTo(postsThroughAgent(), origin, 50, 1000)).toBe(204)
  })

  it('fails with AnswerTooLate, naming the status, when the status arrives after its time-out; the next POST on the agent is answered', async () => {
    const origin = await slowReceiver(200)
    const posts = postsThroughAgent()

    const late = await postTo(posts, origin, 300, 100).then(() => undefined, (error: unknown) => error)
    const next = await postTo(posts, origin, 0, 1000)

    expect(late).toBeInstanceOf(AnswerTooLate)
    expect((late as AnswerTooLate).message).toBe('HTTP 200 later than 0.1 s')
    expect(next).toBe(200)
  })
})
