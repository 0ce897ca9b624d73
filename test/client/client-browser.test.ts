import { createServer } from 'node:http'
import { gzipSync } from 'node:zlib'
import { build, type Format } from 'esbuild'
import { chromium, type Browser } from 'playwright-core'
import { describe, expect, it, onTestFinished } from 'vitest'
import { findChromium, HEADLESS_CHROMIUM_ARGS } from '../../scripts/chromium.js'
import type * as PlantstoreClient from '../../clients/typescript/src/index.js'
import { buildTestApp, TEST_TOKEN } from '../helpers/app.js'
import { listenOnLoopback } from '../helpers/test-servers.js'

const ENTRY = new URL('../../clients/typescript/src/index.ts', import.meta.url).pathname
const BUNDLE_LIMIT_BYTES = 12 * 1024
/** The name the page's bundle gives the client's exports. */
const GLOBAL_NAME = 'plantstoreClient'

/** The client bundled for browsers with esbuild, minified, as a page or an application would ship it. */
async function browserBundle (format: Format): Promise<string> {
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    minify: true,
    format,
    ...(format === 'iife' ? { globalName: GLOBAL_NAME } : {}),
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'silent'
  })
  return result.outputFiles[0]!.text
}

/** A real local web server for the page: its HTML, and the bundle it loads. */
async function pageServer (bundle: string): Promise<string> {
  const server = createServer((request, response) => {
    if (request.url === '/plantstore-client.js') {
      response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(bundle)
      return
    }
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      .end('<!doctype html><title>plants</title><script src="/plantstore-client.js"></script>')
  })
  return `http://127.0.0.1:${await listenOnLoopback(server)}`
}

async function launchChromium (): Promise<Browser> {
  const found = await findChromium()
  const browser = await chromium.launch({ executablePath: found.executablePath, args: HEADLESS_CHROMIUM_ARGS })
  onTestFinished(() => browser.close())
  return browser
}

describe('The client in a browser', () => {
  it(`bundles to at most ${BUNDLE_LIMIT_BYTES} bytes minified and gzipped`, async () => {
    const size = gzipSync(await browserBundle('esm'), { level: 9 }).length
    expect(size).toBeLessThanOrEqual(BUNDLE_LIMIT_BYTES)
  })

  it('creates a plant with an id above 2^53 from a page in Chromium, reads and lists it back exactly, and receives its change', { timeout: 60_000 }, async () => {
    const origin = await pageServer(await browserBundle('iife'))
    const app = await buildTestApp({ config: { corsOrigins: [origin] } })
    const baseUrl = await app.listen({ port: 0, host: '127.0.0.1' })
    const browser = await launchChromium()
    const page = await browser.newPage()
    await page.goto(origin)

    const seen = await page.evaluate(async ({ baseUrl, token, globalName }) => {
      const client = (globalThis as unknown as Record<string, typeof PlantstoreClient>)[globalName]!
      const ps = new client.Plantstore({ baseUrl, token })
      const id = 2n ** 53n + 1n
      const following = new AbortController()
      const changes = ps.changes.follow({ after: await ps.changes.head(), signal: following.signal })
      const firstChange = changes.next()
      const created = await ps.plants.create({ id, name: 'Fern', tag: 'shade' })
      await ps.plants.create({ id: id + 1n, name: 'Moss', tag: 'shade' })
      const read = await ps.plants.get(id)
      const patched = await ps.plants.update(id, { tag: 'sun' }, { ifMatch: read.etag })
      const listed: string[] = []
      for await (const plant of ps.plants.list({ pageSize: 1 })) listed.push(`${typeof plant.id} ${plant.id} ${plant.name} ${plant.tag ?? '-'}`)
      const missing = await ps.plants.get(1).catch((error: unknown) => error instanceof client.PlantstoreError
        ? `${error.name} ${error.status} ${error.message} ${error.requestId === undefined ? 'without' : 'with'} request id`
        : String(error))
      const { value: change } = await firstChange
      following.abort()
      return {
        created: `${created.plant.id} ${created.etag === read.etag}`,
        change: change === undefined ? 'none' : `${typeof change.seq} ${change.type} ${typeof change.id} ${change.id} ${change.plant?.name ?? '-'}`,
        patched: `${patched.plant.id} ${patched.plant.tag ?? '-'}`,
        listed,
        counted: await ps.plants.count({ tag: 'shade' }),
        missing
      }
    }, { baseUrl, token: TEST_TOKEN, globalName: GLOBAL_NAME })
    // Chromium may hold a connection it opened ahead of a request; the app's close would wait for it.
    await browser.close()
    await app.close()

    expect(seen).toEqual({
      created: '9007199254740993 true',
      change: 'bigint plant.created bigint 9007199254740993 Fern',
      patched: '9007199254740993 sun',
      listed: ['bigint 9007199254740993 Fern sun', 'bigint 9007199254740994 Moss shade'],
      counted: 1,
      missing: 'PlantstoreError 404 no plant has id 1 with request id'
    })
  })
})
