import { createServer, type Server } from 'node:http'
import { Writable } from 'node:stream'
import { chromium, type Browser } from 'playwright-core'
import { describe, expect, it, onTestFinished } from 'vitest'
import { findChromium, HEADLESS_CHROMIUM_ARGS } from '../../scripts/chromium.js'
import { buildTestApp, TEST_TOKEN } from '../helpers/app.js'
import { listenOnLoopback } from '../helpers/test-servers.js'

/** What a page's script saw of one answer: status, the headers it asked for (null when hidden from it), body. */
interface Seen {
  readonly status: number
  readonly headers: Record<string, string | null>
  readonly body: string
}

/** A static site on its own port of 127.0.0.1, so its origin differs from the API's: one empty page. */
async function pageOrigin (): Promise<string> {
  const server: Server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>plants</title>')
  })
  return `http://127.0.0.1:${await listenOnLoopback(server)}`
}

async function launchChromium (): Promise<Browser> {
  const build = await findChromium()
  const browser = await chromium.launch({ executablePath: build.executablePath, args: HEADLESS_CHROMIUM_ARGS })
  onTestFinished(() => browser.close())
  return browser
}

describe('A page on another origin, in a real browser', () => {
  it('creates and lists plants with fetch when its origin is in CORS_ORIGINS, and is refused when it is not', { timeout: 30_000 }, async () => {
    const [allowed, refused] = await Promise.all([pageOrigin(), pageOrigin()])
    const requestLines: string[] = []
    const logStream = new Writable({ write (chunk: Buffer, _encoding, callback) { requestLines.push(...chunk.toString().split('\n').filter(Boolean)); callback() } })
    const app = await buildTestApp({ logStream, config: { logLevel: 'info', corsOrigins: [allowed] } })
    const api = await app.listen({ port: 0, host: '127.0.0.1' })
    const browser = await launchChromium()

    const page = await browser.newPage()
    await page.goto(allowed)
    const seen = await page.evaluate(async ({ api, token }) => {
      const read = async (response: Response, names: string[]) => ({
        status: response.status,
        headers: Object.fromEntries(names.map((name) => [name, response.headers.get(name)])),
        body: await response.text()
      })
      const authorization = `Bearer ${token}`
      const json = { authorization, 'content-type': 'application/json' }
      const created = await read(await fetch(`${api}/plants`, {
        method: 'POST', headers: { ...json, 'x-request-id': 'from-the-page' }, body: '{"id":1,"name":"fern"}'
      }), ['location', 'etag', 'x-request-id', 'content-type'])
      await fetch(`${api}/plants`, { method: 'POST', headers: json, body: '{"id":2,"name":"moss"}' })
      const firstPage = await read(await fetch(`${api}/plants?limit=1`, { headers: { authorization } }), ['link', 'x-request-id'])
      const replaced = await read(await fetch(`${api}/plants/1`, {
        method: 'PUT', headers: { ...json, 'if-match': created.headers.etag ?? '' }, body: '{"name":"royal fern"}'
      }), ['etag'])
      const missing = await read(await fetch(`${api}/plants/99`, { headers: { authorization } }), ['x-request-id'])
      const anonymous = await read(await fetch(`${api}/plants`), ['www-authenticate'])
      return { created, firstPage, replaced, missing, anonymous }
    }, { api, token: TEST_TOKEN }) satisfies Record<string, Seen>

    const otherPage = await browser.newPage()
    const consoleErrors: string[] = []
    otherPage.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()) })
    await otherPage.goto(refused)
    const refusedFetches = await otherPage.evaluate(async ({ api, token }) => {
      const outcome = (request: Promise<Response>) => request.then((response) => `status ${response.status}`, (error: Error) => `${error.name}: ${error.message}`)
      return {
        create: await outcome(fetch(`${api}/plants`, {
          method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"id":3,"name":"ivy"}'
        })),
        liveness: await outcome(fetch(`${api}/healthz`))
      }
    }, { api, token: TEST_TOKEN })
    // Chromium may hold a connection it opened ahead of a request; the app's close would wait for it until
    // the request timeout (30 s), so the browser goes first.
    await browser.close()
    await app.close()

    expect(seen.created).toEqual({
      status: 200,
      headers: { location: '/plants/1', etag: expect.stringMatching(/^"[^"]+"$/), 'x-request-id': 'from-the-page', 'content-type': 'application/json; charset=utf-8' },
      body: '{"name":"fern"}'
    })
    expect(seen.firstPage).toEqual({
      status: 200,
      headers: { link: '</plants?limit=1&after=1>; rel="next"', 'x-request-id': expect.any(String) },
      body: '[{"id":1,"name":"fern"}]'
    })
    expect(seen.replaced).toEqual({ status: 200, headers: { etag: expect.stringMatching(/^"[^"]+"$/) }, body: '{"id":1,"name":"royal fern"}' })
    expect(seen.replaced.headers.etag).not.toBe(seen.created.headers.etag)
    expect(seen.missing).toEqual({ status: 404, headers: { 'x-request-id': expect.any(String) }, body: '{"error":404,"message":"no plant has id 99"}' })
    // A header CORS does not expose stays hidden from the script, though it was sent.
    expect(seen.anonymous).toEqual({
      status: 401,
      headers: { 'www-authenticate': null },
      body: '{"error":401,"message":"this operation needs an \\"Authorization: Bearer <token>\\" header"}'
    })

    expect(refusedFetches).toEqual({ create: 'TypeError: Failed to fetch', liveness: 'TypeError: Failed to fetch' })
    expect(consoleErrors.join('\n')).toMatch(/from origin '.+' has been blocked by CORS policy: Response to preflight request doesn't pass access control check/)

    const answered = requestLines.map((line) => JSON.parse(line) as { method: string, url: string, statusCode: number })
      .filter((line) => line.method !== undefined).map((line) => `${line.method} ${line.url} ${line.statusCode}`)
    // The browser's own preflights (it keeps their answers per URL), then the requests themselves. The
    // refused origin's POST never leaves the browser; its simple GET does, and only its answer is withheld.
    expect(answered).toEqual([
      'OPTIONS /plants 204', 'POST /plants 200', 'POST /plants 200',
      'OPTIONS /plants?limit=1 204', 'GET /plants?limit=1 200',
      'OPTIONS /plants/1 204', 'PUT /plants/1 200',
      'OPTIONS /plants/99 204', 'GET /plants/99 404',
      'GET /plants 401',
      'OPTIONS /plants 403', 'GET /healthz 200'
    ])
  })
})
