import type { Server } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { gunzipSync } from 'node:zlib'
import { listenOnLoopback, serverOfWholeRequests } from './test-servers.js'

export type AttributeValue = string | number | boolean | bigint | null | AttributeValue[]

export const SPAN_KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const

/** A span as the exporter sent it, in either encoding; ids in lowercase hexadecimal. */
export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  /** Absent for a root span. */
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: typeof SPAN_KINDS[number]
  readonly startTimeUnixNano: bigint
  readonly endTimeUnixNano: bigint
  readonly attributes: Readonly<Record<string, AttributeValue>>
  readonly links: ReadonlyArray<{ readonly traceId: string, readonly spanId: string }>
  /** 0 unset, 1 ok, 2 error. */
  readonly status: { readonly code: number, readonly message?: string }
  readonly resource: Readonly<Record<string, AttributeValue>>
  readonly scope: string
}

/**
 * An OTLP/HTTP trace receiver on 127.0.0.1: accepts `POST /v1/traces` in OTLP JSON
 * (`application/json`) or protobuf (`application/x-protobuf`, decoded here from the wire format),
 * gzipped or not, and keeps every span. Closed when the test ends.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = []
  /** The content type of every export request received. */
  readonly contentTypes: string[] = []
  /** Why requests that could not be decoded were refused. */
  readonly refused: string[] = []
  private readonly server: Server
  private port = 0

  private constructor () {
    this.server = serverOfWholeRequests((request, received, response) => {
      if (request.method !== 'POST' || request.url !== '/v1/traces') {
        response.writeHead(404).end()
        return
      }
      const contentType = String(request.headers['content-type'])
      const body = request.headers['content-encoding'] === 'gzip' ? gunzipSync(received) : received
      try {
        this.spans.push(...(contentType.startsWith('application/json') ? spansOfJson(body.toString('utf8')) : spansOfProtobuf(body)))
      } catch (error) {
        this.refused.push(String(error))
        response.writeHead(400, { 'content-type': 'text/plain' }).end(String(error))
        return
      }
      this.contentTypes.push(contentType)
      // An empty ExportTraceServiceResponse: full success, in either encoding.
      response.writeHead(200, { 'content-type': contentType.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' })
        .end(contentType.startsWith('application/json') ? '{}' : '')
    })
  }

  static async start (): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver()
    receiver.port = await listenOnLoopback(receiver.server, () => receiver.close())
    return receiver
  }

  /** For OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces). */
  get endpoint (): string {
    return `http://127.0.0.1:${this.port}`
  }

  /** Waits until the spans received satisfy `done`; fails after `timeoutMs` listing the names received. */
  async waitFor (done: (spans: readonly ReceivedSpan[]) => boolean, timeoutMs = 10_000): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + timeoutMs
    while (!done(this.spans)) {
      if (Date.now() > deadline) {
        throw new Error(`spans received within ${timeoutMs} ms: ${JSON.stringify(this.spans.map((span) => span.name))}` +
          (this.refused.length === 0 ? '' : `; refused: ${this.refused.join('; ')}`))
      }
      await sleep(20)
    }
    return this.spans
  }

  /** The one span named `name` (failing when there are none or several). */
  only (name: string): ReceivedSpan {
    const named = this.spans.filter((span) => span.name === name)
    if (named.length !== 1) throw new Error(`${named.length} spans named ${JSON.stringify(name)}: ${JSON.stringify(this.spans.map((span) => span.name))}`)
    return named[0] as ReceivedSpan
  }

  async close (): Promise<void> {
    if (!this.server.listening) return
    this.server.closeAllConnections()
    await new Promise((resolve) => this.server.close(resolve))
  }
}

// --- OTLP JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding) ---

interface JsonKeyValue { key: string, value: JsonAnyValue }
interface JsonAnyValue {
  stringValue?: string
  boolValue?: boolean
  intValue?: number | string
  doubleValue?: number
  arrayValue?: { values?: JsonAnyValue[] }
  bytesValue?: string
}
interface JsonSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind?: number
  startTimeUnixNano: string | number
  endTimeUnixNano: string | number
  attributes?: JsonKeyValue[]
  links?: Array<{ traceId: string, spanId: string }>
  status?: { code?: number, message?: string }
}
interface JsonRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: JsonKeyValue[] }
    scopeSpans?: Array<{ scope?: { name?: string }, spans?: JsonSpan[] }>
  }>
}

function spansOfJson (text: string): ReceivedSpan[] {
  const request = JSON.parse(text) as JsonRequest
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const resource = jsonAttributes(resourceSpans.resource?.attributes)
    return (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans) => (scopeSpans.spans ?? []).map((span): ReceivedSpan => ({
      traceId: span.traceId.toLowerCase(),
      spanId: span.spanId.toLowerCase(),
      ...(span.parentSpanId === undefined || span.parentSpanId === '' ? {} : { parentSpanId: span.parentSpanId.toLowerCase() }),
      name: span.name,
      kind: SPAN_KINDS[span.kind ?? 0] ?? 'unspecified',
      startTimeUnixNano: BigInt(span.startTimeUnixNano),
      endTimeUnixNano: BigInt(span.endTimeUnixNano),
      attributes: jsonAttributes(span.attributes),
      links: (span.links ?? []).map((link) => ({ traceId: link.traceId.toLowerCase(), spanId: link.spanId.toLowerCase() })),
      status: { code: span.status?.code ?? 0, ...(span.status?.message === undefined ? {} : { message: span.status.message }) },
      resource,
      scope: scopeSpans.scope?.name ?? ''
    })))
  })
}

function jsonAttributes (keyValues: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((keyValues ?? []).map(({ key, value }) => [key, jsonValue(value)]))
}

function jsonValue (value: JsonAnyValue): AttributeValue {
  if (value.stringValue !== undefined) return value.stringValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(jsonValue)
  if (value.bytesValue !== undefined) return value.bytesValue
  return null
}

// --- OTLP protobuf (opentelemetry/proto/collector/trace/v1/trace_service.proto), read field by field ---

type WireValue = bigint | Buffer

/** A message's fields by number: varints as bigint, the rest as their bytes. */
function fieldsOf (bytes: Buffer): Map<number, WireValue[]> {
  const fields = new Map<number, WireValue[]>()
  let offset = 0
  const varint = (): bigint => {
    let result = 0n
    let shift = 0n
    for (;;) {
      const byte = bytes[offset++]
      if (byte === undefined) throw new Error('truncated varint')
      result |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return result
      shift += 7n
    }
  }
  const take = (length: number): Buffer => {
    if (offset + length > bytes.length) throw new Error('truncated field')
    const value = bytes.subarray(offset, offset + length)
    offset += length
    return value
  }
  while (offset < bytes.length) {
    const tag = Number(varint())
    const [fieldNumber, wireType] = [tag >>> 3, tag & 7]
    let value: WireValue
    if (wireType === 0) value = varint()
    else if (wireType === 1) value = take(8)
    else if (wireType === 2) value = take(Number(varint()))
    else if (wireType === 5) value = take(4)
    else throw new Error(`unexpected wire type ${wireType}`)
    fields.set(fieldNumber, [...(fields.get(fieldNumber) ?? []), value])
  }
  return fields
}

const messages = (fields: Map<number, WireValue[]>, field: number): Array<Map<number, WireValue[]>> =>
  (fields.get(field) ?? []).map((value) => fieldsOf(value as Buffer))
const bytesOf = (fields: Map<number, WireValue[]>, field: number): Buffer | undefined => fields.get(field)?.[0] as Buffer | undefined
const stringOf = (fields: Map<number, WireValue[]>, field: number): string => bytesOf(fields, field)?.toString('utf8') ?? ''
const numberOf = (fields: Map<number, WireValue[]>, field: number): number => Number(fields.get(field)?.[0] ?? 0n)
const fixed64Of = (fields: Map<number, WireValue[]>, field: number): bigint => bytesOf(fields, field)?.readBigUInt64LE() ?? 0n

function spansOfProtobuf (body: Buffer): ReceivedSpan[] {
  return messages(fieldsOf(body), 1).flatMap((resourceSpans) => {
    const resource = protobufAttributes(messages(messages(resourceSpans, 1)[0] ?? new Map(), 1))
    return messages(resourceSpans, 2).flatMap((scopeSpans) => {
      const scope = stringOf(messages(scopeSpans, 1)[0] ?? new Map(), 1)
      return messages(scopeSpans, 2).map((span): ReceivedSpan => {
        const parentSpanId = bytesOf(span, 4)
        const status = messages(span, 15)[0] ?? new Map()
        const statusMessage = stringOf(status, 2)
        return {
          traceId: bytesOf(span, 1)?.toString('hex') ?? '',
          spanId: bytesOf(span, 2)?.toString('hex') ?? '',
          ...(parentSpanId === undefined || parentSpanId.length === 0 ? {} : { parentSpanId: parentSpanId.toString('hex') }),
          name: stringOf(span, 5),
          kind: SPAN_KINDS[numberOf(span, 6)] ?? 'unspecified',
          startTimeUnixNano: fixed64Of(span, 7),
          endTimeUnixNano: fixed64Of(span, 8),
          attributes: protobufAttributes(messages(span, 9)),
          links: messages(span, 13).map((link) => ({
            traceId: bytesOf(link, 1)?.toString('hex') ?? '',
            spanId: bytesOf(link, 2)?.toString('hex') ?? ''
          })),
          status: { code: numberOf(status, 3), ...(statusMessage === '' ? {} : { message: statusMessage }) },
          resource,
          scope
        }
      })
    })
  })
}

function protobufAttributes (keyValues: Array<Map<number, WireValue[]>>): Record<string, AttributeValue> {
  return Object.fromEntries(keyValues.map((keyValue) => [stringOf(keyValue, 1), protobufValue(messages(keyValue, 2)[0] ?? new Map())]))
}

function protobufValue (value: Map<number, WireValue[]>): AttributeValue {
  if (value.has(1)) return stringOf(value, 1)
  if (value.has(2)) return numberOf(value, 2) !== 0
  if (value.has(3)) return Number(BigInt.asIntN(64, value.get(3)?.[0] as bigint))
  if (value.has(4)) return bytesOf(value, 4)?.readDoubleLE() ?? 0
  if (value.has(5)) return messages(messages(value, 5)[0] ?? new Map(), 1).map(protobufValue)
  if (value.has(7)) return bytesOf(value, 7)?.toString('base64') ?? ''
  return null
}
