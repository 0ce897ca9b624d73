import { createServer } from 'node:http'

/**
 * The bench's webhook receiver: answers every delivery 204 and counts them, distinct `webhook-id`s
 * apart. `GET /count` answers `{"received":N,"distinct":M}`. It prints its URL once it listens.
 */
let received = 0
const seen = new Set<string>()
const server = createServer((request, response) => {
  if (request.method === 'GET') {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ received, distinct: seen.size }))
    return
  }
  request.resume()
  request.on('end', () => {
    received++
    seen.add(String(request.headers['webhook-id']))
    response.writeHead(204).end()
  })
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`Server listening at http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}\n`)
})
