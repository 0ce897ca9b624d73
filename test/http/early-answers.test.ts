import { fetch } from 'undici'
import { describe, expect, it } from 'vitest'
import { LINGER_MAX_BYTES } from '../../src/http/lingering-close.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { headOf, portOf, uploadTo } from '../helpers/uploads.js'

const BODY_LIMIT = 16384
/** What the server may read besides the lingering allowance: the request head and the chunks in flight when it answered. */
const SLACK_BYTES = 1024 * 1024

async function listeningApp () {
  const app = await buildTestApp({ config: { bodyLimit: BODY_LIMIT } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return app
}

/** A request body that a client streams, 64 KiB at a time, up to `totalBytes`; `sent()` says how much it handed over. */
function streamedBody (totalBytes: number) {
  const chunk = new Uint8Array(64 * 1024).fill(0x61)
  let sent = 0
  const body = new ReadableStream<Uint8Array>({
    pull (controller) {
      if (sent >= totalBytes) {
        controller.close()
        return
      }
      sent += chunk.length
      controller.enqueue(chunk)
    }
  })
  return { body, sent: () => sent }
}

describe('An answer sent before the request body arrived', () => {
  it('when an unauthenticated client keeps uploading, then it reads its 401 with Connection: close and the server stops reading within the bound', async () => {
    const app = await listeningApp()

    const outcome = await uploadTo(app, 'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n', 20_000_000)

    const { status, headers, body } = headOf(outcome.answer)
    expect({ status, connection: headers.connection, body: JSON.parse(body) as unknown }).toEqual({
      status: 401, connection: 'close', body: { error: 401, message: 'this operation needs an "Authorization: Bearer <token>" header' }
    })
    expect(outcome.serverBytesRead).toBeLessThan(LINGER_MAX_BYTES + SLACK_BYTES)
    expect(outcome.writing).toMatch(/^(EPIPE|ECONNRESET)$/)
  })

  it('when a token without the admin scope keeps uploading under /admin, then it reads its 403 with Connection: close and the server stops reading within the bound', async () => {
    const app = await listeningApp()

    const outcome = await uploadTo(app, `POST /admin/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer().authorization}\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n`, 20_000_000)

    const { status, headers, body } = headOf(outcome.answer)
    expect({ status, connection: headers.connection, body: JSON.parse(body) as unknown }).toEqual({
      status: 403, connection: 'close', body: { error: 403, message: 'this token lacks the scope "admin", which this operation needs' }
    })
    expect(outcome.serverBytesRead).toBeLessThan(LINGER_MAX_BYTES + SLACK_BYTES)
  })

  it('when a chunked body with a valid token outgrows BODY_LIMIT, then the client still sending reads the 413, not a reset', async () => {
    const app = await listeningApp()

    const upload = streamedBody(32 * 1024 * 1024)
    const response = await fetch(`http://127.0.0.1:${portOf(app)}/plants`, {
      method: 'POST', headers: { ...bearer(), 'content-type': 'application/json' }, body: upload.body, duplex: 'half'
    })

    expect({ status: response.status, connection: response.headers.get('connection'), body: await response.json() }).toEqual({
      status: 413, connection: 'close', body: { error: 413, message: `request body is larger than ${BODY_LIMIT} bytes` }
    })
    expect(upload.sent()).toBeLessThan(32 * 1024 * 1024)
  })

  it('when the media type is refused while the body is still streaming, then the client reads the 415, not a reset', async () => {
    const app = await listeningApp()

    const upload = streamedBody(32 * 1024 * 1024)
    const response = await fetch(`http://127.0.0.1:${portOf(app)}/plants`, {
      method: 'POST', headers: { ...bearer(), 'content-type': 'text/plain' }, body: upload.body, duplex: 'half'
    })

    expect({ status: response.status, connection: response.headers.get('connection'), body: await response.json() }).toEqual({
      status: 415, connection: 'close', body: { error: 415, message: 'Content-Type must be application/json' }
    })
  })

  it('when a raw client sends a chunked body over BODY_LIMIT, then it reads the 413 with Connection: close before the server stops reading', async () => {
    const app = await listeningApp()

    const outcome = await uploadTo(app, `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer().authorization}\r\n` +
      'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n', 20_000_000, { chunked: true })

    const { status, headers } = headOf(outcome.answer)
    expect({ status, connection: headers.connection }).toEqual({ status: 413, connection: 'close' })
    expect(outcome.serverBytesRead).toBeLessThan(LINGER_MAX_BYTES + SLACK_BYTES)
  })

  it.each([
    ['a declared body over BODY_LIMIT with a valid token', 413, `Authorization: ${bearer().authorization}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n`, false],
    ['a chunked body over BODY_LIMIT with a valid token', 413, `Authorization: ${bearer().authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n`, true],
    ['a body of a refused media type', 415, `Authorization: ${bearer().authorization}\r\nContent-Type: text/plain\r\nContent-Length: 1048576\r\n`, false],
    ['a body without a token', 401, 'Content-Type: application/json\r\nContent-Length: 1048576\r\n', false]
  ])('when a client sends %s (1 MiB) and reads only then, then it reads its %i, not a reset', async (_case, status, headers, chunked) => {
    const app = await listeningApp()

    const outcome = await uploadTo(app, `POST /plants HTTP/1.1\r\nHost: x\r\n${headers}\r\n`, 1024 * 1024, { chunked, readAfterSending: true })

    expect({ writing: outcome.writing, status: headOf(outcome.answer).status, connection: headOf(outcome.answer).headers.connection })
      .toEqual({ writing: 'sent', status, connection: 'close' })
  })

  it('when the whole small request had arrived, then the answer keeps the connection open', async () => {
    const app = await listeningApp()

    const outcome = await uploadTo(app, 'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n', 0)

    const { status, headers } = headOf(outcome.answer)
    expect({ status, connection: headers.connection }).toEqual({ status: 401, connection: 'keep-alive' })
  })
})
