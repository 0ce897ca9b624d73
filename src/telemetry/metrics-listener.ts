import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { methodNotAllowed, PlantstoreError, routeNotFound } from '../errors.js'
import { pathOf } from '../http/query-string.js'
import type { ServiceMetrics } from './metrics.js'

const METRICS_PATH = '/metrics'

/** The admin listener could not start; names the variable to change. */
export class MetricsListenerError extends Error {
  constructor (host: string, port: number, cause: NodeJS.ErrnoException) {
    super(cause.code === 'EADDRINUSE'
      ? `METRICS_PORT ${port} is already in use on ${host}: set METRICS_PORT to a free port, or to 0 to turn metrics off`
      : `METRICS_PORT ${port} cannot be listened on at ${host} (${cause.code ?? cause.message})`, { cause })
    this.name = 'MetricsListenerError'
  }
}

export interface MetricsListener {
  /** `http://host:port`, the port the system chose when 0 was asked for. */
  readonly url: string
  close (): Promise<void>
}

/**
 * `GET /metrics` on its own listener, apart from the public port: scrapers reach it inside the cluster,
 * clients of the API never do, and it needs no token. Anything else is answered in the `Error` envelope.
 */
export async function listenForMetrics (metrics: ServiceMetrics, host: string, port: number): Promise<MetricsListener> {
  const server = createServer({ requireHostHeader: false }, (request, response) => { answer(metrics, request, response) })
  server.keepAliveTimeout = 65_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => { reject(new MetricsListenerError(host, port, error)) })
    server.listen({ host, port }, resolve)
  })
  const address = server.address() as AddressInfo
  const hostInUrl = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return { url: `http://${hostInUrl}:${address.port}`, close: () => closeServer(server) }
}

function answer (metrics: ServiceMetrics, request: IncomingMessage, response: ServerResponse): void {
  const path = pathOf(request.url ?? '/')
  if (path !== METRICS_PATH) {
    sendError(response, routeNotFound(request.method ?? 'GET', path))
    return
  }
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    sendError(response, methodNotAllowed(request.method ?? '', METRICS_PATH, ['GET', 'HEAD']))
    return
  }
  metrics.scrape().then(({ contentType, text }) => {
    response.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' })
    response.end(request.method === 'HEAD' ? undefined : text)
  }, (error: unknown) => {
    sendError(response, new PlantstoreError(500, `the metrics could not be collected: ${(error as Error).message}`))
  })
}

function sendError (response: ServerResponse, error: PlantstoreError): void {
  const body = JSON.stringify({ error: error.statusCode, message: error.message })
  response.writeHead(error.statusCode, { ...error.headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
  response.end(body)
}

function closeServer (server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => { resolve() })
    server.closeIdleConnections()
  })
}
