import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Page, type Response } from 'playwright-core'
import { describe, expect, it, onTestFinished } from 'vitest'
import { findChromium, HEADLESS_CHROMIUM_ARGS } from '../../scripts/chromium.js'
import { temporaryFolder } from '../helpers/app.js'
import { generateSigningKey, startIdentityProvider } from '../helpers/identity-provider.js'
import { claimsFor, TEST_AUDIENCE } from '../helpers/jwt-tokens.js'
import { startServer } from '../helpers/server-process.js'

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url)
const TOKEN = 'swagger-ui-test-token'
const PLANT_PATH = '/plants/9007199254740993'

interface LiveResponse {
  readonly status: string
  readonly body: string
  /** The response headers as Swagger UI lists them, by lower-case name. */
  readonly headers: Record<string, string>
}

async function tryOperation (page: Page, operationId: string, fill: (operation: string) => Promise<void>): Promise<LiveResponse> {
  const operation = `#operations-plants-${operationId}`
  await page.click(`${operation} .opblock-summary`)
  const tryItOut = page.locator(`${operation} button.try-out__btn:not(.cancel)`)
  if (await tryItOut.isVisible()) await tryItOut.click()
  await fill(operation)
  await page.click(`${operation} button.execute`)
  const liveResponse = `${operation} .live-responses-table .response`
  const status = page.locator(`${liveResponse} .response-col_status`).first()
  await status.waitFor()
  const body = page.locator(`${liveResponse} .response-col_description pre.microlight`).first()
  const headerLines = await page.locator(`${liveResponse} .response-col_description .headerline`).allInnerTexts()
  const headers = Object.fromEntries(headerLines.map((line) => {
    const separator = line.indexOf(':')
    return [line.slice(0, separator).trim().toLowerCase(), line.slice(separator + 1).trim()]
  }))
  return { status: (await status.innerText()).trim(), body: await body.innerText(), headers }
}

function onTheWire (page: Page, method: string): Promise<Response> {
  return page.waitForResponse((response) => response.request().method() === method && response.url().endsWith(PLANT_PATH))
}

/** Swagger UI at `baseUrl` in a new headless Chromium (closed when the test ends), and the page's script errors. */
async function openDocs (baseUrl: string): Promise<{ page: Page, pageErrors: string[] }> {
  const browser = await chromium.launch({ executablePath: (await findChromium()).executablePath, args: HEADLESS_CHROMIUM_ARGS })
  onTestFinished(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1280, height: 2000 } })
  const pageErrors: string[] = []
  page.on('pageerror', (error) => pageErrors.push(error.message))
  await page.goto(`${baseUrl}/docs`)
  return { page, pageErrors }
}

/** Pastes `token` into Authorize, as a user does; resolves with what the dialog says about the scheme. */
async function authorize (page: Page, token: string): Promise<string> {
  await page.click('button.authorize')
  const schemeText = await page.locator('.modal-ux .auth-container').first().innerText()
  await page.fill('.modal-ux input[type="text"]', token)
  await page.click('.modal-ux button.authorize')
  await page.click('.modal-ux button.btn-done')
  return schemeText
}

describe('Swagger UI in a real browser', () => {
  it('lets a user authorize, create a plant with "Try it out", read it back, patch it and replace it', { timeout: 60_000 }, async () => {
    const server = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'ui.db')}`, PLANTSTORE_TOKENS: TOKEN })
    const { page, pageErrors } = await openDocs(server.baseUrl)
    await authorize(page, TOKEN)
    const created = await tryOperation(page, 'createPlant', async (operation) => {
      await page.fill(`${operation} textarea.body-param__text`, '{"id": 9007199254740993, "name": "Swagger fern", "tag": "ui"}')
    })
    const readOnTheWire = onTheWire(page, 'GET')
    const read = await tryOperation(page, 'getPlant', async (operation) => {
      await page.fill(`${operation} input[placeholder="id"]`, '9007199254740993')
    })
    const readBytes = await (await readOnTheWire).text()

    let patchMediaType = ''
    const patchOnTheWire = onTheWire(page, 'PATCH')
    const patched = await tryOperation(page, 'updatePlant', async (operation) => {
      await page.fill(`${operation} input[placeholder="id"]`, '9007199254740993')
      const mediaType = page.locator(`${operation} .body-param-content-type select`)
      if (await mediaType.inputValue() !== 'application/merge-patch+json') await mediaType.selectOption('application/merge-patch+json')
      patchMediaType = await mediaType.inputValue()
      await page.fill(`${operation} textarea.body-param__text`, '{"name": "Renamed fern", "tag": null}')
    })
    const patchResponse = await patchOnTheWire
    const patchBytes = await patchResponse.text()

    // The user copies the ETag Swagger UI shows for the patched plant into If-Match, so the
    // replacement applies only to the version they saw.
    const putOnTheWire = onTheWire(page, 'PUT')
    const replaced = await tryOperation(page, 'replacePlant', async (operation) => {
      await page.fill(`${operation} input[placeholder="id"]`, '9007199254740993')
      await page.fill(`${operation} input[placeholder="if-match"]`, patched.headers.etag ?? '')
      await page.fill(`${operation} textarea.body-param__text`, '{"name": "Replaced fern", "tag": "potted"}')
    })
    const putResponse = await putOnTheWire
    const putBytes = await putResponse.text()

    mkdirSync(ARTIFACTS, { recursive: true })
    await page.screenshot({ path: new URL('swagger-ui.png', ARTIFACTS).pathname, fullPage: true })
    await page.locator('#operations-plants-updatePlant').screenshot({ path: new URL('swagger-ui-patch.png', ARTIFACTS).pathname })
    const stored = await fetch(`${server.baseUrl}${PLANT_PATH}`, { headers: { authorization: `Bearer ${TOKEN}` } })

    expect(created.status).toBe('200')
    expect(JSON.parse(created.body)).toEqual({ name: 'Swagger fern', tag: 'ui' })
    expect(read.status).toBe('200')
    expect(read.body).toContain('"name": "Swagger fern"')
    // The browser receives every digit; Swagger UI's pretty-printer (JavaScript numbers) shows ids
    // above 2^53 rounded, which docs/reference/api/operations.md points out.
    expect(readBytes).toBe('{"id":9007199254740993,"name":"Swagger fern","tag":"ui"}')

    expect(patchMediaType).toBe('application/merge-patch+json')
    expect(patchResponse.request().headers()['content-type']).toBe('application/merge-patch+json')
    expect(patchResponse.request().postData()).toBe('{"name": "Renamed fern", "tag": null}')
    expect(patched.status).toBe('200')
    expect(patched.body).toContain('"name": "Renamed fern"')
    expect(patched.body).not.toContain('"tag"')
    expect(patchBytes).toBe('{"id":9007199254740993,"name":"Renamed fern"}')
    expect(patched.headers.etag).toMatch(/^"[^"]+"$/)
    expect(patched.headers.etag).toBe(patchResponse.headers().etag)

    expect(putResponse.request().headers()['if-match']).toBe(patched.headers.etag)
    expect(replaced.status).toBe('200')
    expect(replaced.body).toContain('"name": "Replaced fern"')
    expect(replaced.body).toContain('"tag": "potted"')
    expect(putBytes).toBe('{"id":9007199254740993,"name":"Replaced fern","tag":"potted"}')
    expect(replaced.headers.etag).toMatch(/^"[^"]+"$/)
    expect(replaced.headers.etag).toBe(putResponse.headers().etag)
    expect(replaced.headers.etag).not.toBe(patched.headers.etag)

    expect(stored.status).toBe(200)
    expect(stored.headers.get('etag')).toBe(replaced.headers.etag)
    expect(await stored.text()).toBe('{"id":9007199254740993,"name":"Replaced fern","tag":"potted"}')
    expect(pageErrors).toEqual([])
  })

  it('takes a JWT from the identity provider pasted into Authorize, and sends it as the bearer', { timeout: 60_000 }, async () => {
    const provider = await startIdentityProvider({ keys: [await generateSigningKey('RS256', 'swagger-rsa')] })
    onTestFinished(() => provider.close())
    const server = await startServer({
      DATABASE_URL: `sqlite:${join(temporaryFolder(), 'ui-jwt.db')}`,
      PLANTSTORE_TOKENS: TOKEN,
      AUTH_JWT_ISSUER: provider.issuer,
      AUTH_JWT_AUDIENCE: TEST_AUDIENCE
    })
    const jwt = await provider.sign(claimsFor(provider, { sub: 'swagger-user', scope: 'plants:read plants:write' }))
    const { page, pageErrors } = await openDocs(server.baseUrl)
    const schemeText = await authorize(page, jwt)
    const createdOnTheWire = page.waitForResponse((response) => response.request().method() === 'POST' && response.url().endsWith('/plants'))
    const created = await tryOperation(page, 'createPlant', async (operation) => {
      await page.fill(`${operation} textarea.body-param__text`, '{"id": 9007199254740993, "name": "Federated fern"}')
    })
    const request = (await createdOnTheWire).request()
    const stored = await fetch(`${server.baseUrl}${PLANT_PATH}`, { headers: { authorization: `Bearer ${TOKEN}` } })

    expect(schemeText).toContain(`a JWT access token issued by ${provider.issuer} for the audience ${TEST_AUDIENCE}`)
    expect(request.headers().authorization).toBe(`Bearer ${jwt}`)
    expect(created.status).toBe('200')
    expect(JSON.parse(created.body)).toEqual({ name: 'Federated fern' })
    expect({ status: stored.status, body: await stored.text() }).toEqual({ status: 200, body: '{"id":9007199254740993,"name":"Federated fern"}' })
    expect(pageErrors).toEqual([])
  })
})
