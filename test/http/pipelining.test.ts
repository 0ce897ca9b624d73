import { connect } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { backends, bearer, buildTestApp } from '../helpers/app.js'

interface RawResponse { readonly status: number, readonly body: string }

/** Sends `requests` in one write on one connection and reads `count` responses (Content-Length framed). */
async function pipeline (port: number, requests: string[]): Promise<RawResponse[]> {
  const socket = connect(port, '127.0.0.1')
  onTestFinished(() => { socket.destroy() })
  const raw = await new Promise<string>((resolve, reject) => {
    let received = ''
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no complete answer within 10 s: ${received}`)))
    socket.on('data', (chunk) => { received += chunk.toString() })
    socket.on('end', () => resolve(received))
    socket.on('error', reject)
    socket.write(requests.join(''))
  })
  const responses: RawResponse[] = []
  let rest = raw
  while (rest !== '') {
    const headerEnd = rest.indexOf('\r\n\r\n')
    const head = rest.slice(0, headerEnd)
    const length = Number(/^content-length: (\d+)$/im.exec(head)?.[1] ?? 0)
    responses.push({ status: Number(head.split(' ')[1]), body: rest.slice(headerEnd + 4, headerEnd + 4 + length) })
    rest = rest.slice(headerEnd + 4 + length)
  }
  return responses
}

function httpRequest (method: string, path: string, body?: string, last = false): string {
  const headers = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: ${bearer().authorization}`]
  if (body !== undefined) headers.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`)
  if (last) headers.push('Connection: close')
  return `${headers.join('\r\n')}\r\n\r\n${body ?? ''}`
}

describe.each(backends)('Pipelined requests on $name', (backend) => {
  it('read their own writes: each request sees the effect of the writes sent before it on the connection', async () => {
    const app = await buildTestApp({ store: await backend.open() })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }

    const responses = await pipeline(port, [
      httpRequest('POST', '/plants', '{"id":9007199254740993,"name":"Pipelined fern"}'),
      httpRequest('GET', '/plants/9007199254740993'),
      httpRequest('GET', '/plants?after=9007199254740992'),
      httpRequest('DELETE', '/plants/9007199254740993'),
      httpRequest('GET', '/plants/9007199254740993'),
      httpRequest('POST', '/plants', '{"id":9007199254740993,"name":"Second fern","tag":"again"}'),
      httpRequest('POST', '/plants', '{"id":9007199254740993,"name":"Second fern","tag":"again"}'),
      httpRequest('GET', '/plants/9007199254740993', undefined, true)
    ])

    expect(responses).toEqual([
      { status: 200, body: '{"name":"Pipelined fern"}' },
      { status: 200, body: '{"id":9007199254740993,"name":"Pipelined fern"}' },
      { status: 200, body: '[{"id":9007199254740993,"name":"Pipelined fern"}]' },
      { status: 204, body: '' },
      { status: 404, body: '{"error":404,"message":"no plant has id 9007199254740993"}' },
      { status: 200, body: '{"name":"Second fern","tag":"again"}' },
      { status: 200, body: '{"name":"Second fern","tag":"again"}' },
      { status: 200, body: '{"id":9007199254740993,"name":"Second fern","tag":"again"}' }
    ])
  })
})
