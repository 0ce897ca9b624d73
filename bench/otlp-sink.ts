import { createServer } from 'node:http'
import { gunzipSync } from 'node:zlib'

/**
 * The bench's OTLP/HTTP trace sink: takes `POST /v1/traces` (protobuf, or JSON; gzipped or not),
 * counts the export requests, their bytes and their spans by name, and discards them, answering 200
 * with an empty ExportTraceServiceResponse. `GET /count` answers
 * `{"requests":N,"bytes":B,"spans":S,"byName":{"POST /plants":…},"refused":R}`. It prints its URL once it listens.
 */
let requests = 0
let bytes = 0
let spans = 0
let refused = 0
const byName = new Map<string, number>()

const server = createServer((request, response) => {
  if (request.method === 'GET') {
    response.writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ requests, bytes, spans, byName: Object.fromEntries(byName), refused }))
    return
  }
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    const isJson = String(request.headers['content-type']).startsWith('application/json')
    try {
      let body = Buffer.concat(chunks)
      bytes += body.length
      if (request.headers['content-encoding'] === 'gzip') body = gunzipSync(body)
      const names = isJson ? spanNamesOfJson(body) : spanNamesOfProtobuf(body)
      requests++
      spans += names.length
      for (const name of names) byName.set(name, (byName.get(name) ?? 0) + 1)
    } catch {
      refused++
      response.writeHead(400).end()
      return
    }
    response.writeHead(200, { 'content-type': isJson ? 'application/json' : 'application/x-protobuf' }).end(isJson ? '{}' : '')
  })
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`Server listening at http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}\n`)
})

function spanNamesOfJson (body: Buffer): string[] {
  const request = JSON.parse(body.toString('utf8')) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ name?: string }> }> }> }
  return (request.resourceSpans ?? []).flatMap((resource) =>
    (resource.scopeSpans ?? []).flatMap((scope) => (scope.spans ?? []).map((span) => span.name ?? '')))
}

/**
 * The names of an ExportTraceServiceRequest's spans, read off the wire format without a schema:
 * resource_spans (1) → scope_spans (2) → spans (2) → name (5); every other field is skipped.
 */
function spanNamesOfProtobuf (body: Buffer): string[] {
  const names: string[] = []
  for (const resourceSpans of fieldsOf(body, 0, body.length, 1)) {
    for (const scopeSpans of fieldsOf(body, resourceSpans.start, resourceSpans.end, 2)) {
      for (const span of fieldsOf(body, scopeSpans.start, scopeSpans.end, 2)) {
        const [name] = fieldsOf(body, span.start, span.end, 5)
        names.push(name === undefined ? '' : body.toString('utf8', name.start, name.end))
      }
    }
  }
  return names
}

/** The byte ranges of the length-delimited fields numbered `wanted` in the message at [start, end). */
function fieldsOf (buffer: Buffer, start: number, end: number, wanted: number): Array<{ start: number, end: number }> {
  const found: Array<{ start: number, end: number }> = []
  let offset = start
  const varint = () => {
    let value = 0
    let shift = 1
    for (;;) {
      if (offset >= end) throw new Error('truncated varint')
      const byte = buffer[offset++] as number
      value += (byte & 0x7f) * shift
      if (byte < 0x80) return value
      shift *= 128
    }
  }
  while (offset < end) {
    const key = varint()
    const wireType = key % 8
    if (wireType === 0) varint()
    else if (wireType === 1) offset += 8
    else if (wireType === 5) offset += 4
    else if (wireType === 2) {
      const length = varint()
      if (Math.floor(key / 8) === wanted) found.push({ start: offset, end: offset + length })
      offset += length
    } else {
      throw new Error(`wire type ${wireType}`)
    }
  }
  if (offset !== end) throw new Error('field past the end of its message')
  return found
}
