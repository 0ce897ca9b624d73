import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Page } from 'playwright-core'
import { describe, expect, it, onTestFinished } from 'vitest'
import { findChromium, HEADLESS_CHROMIUM_ARGS } from './chromium.js'
import { temporaryFolder } from './helper.js'
import { startServer } from './server-process.js'

const ARTIFACTS = new URL('../test-artifacts/', import.meta.url)
const TOKEN = 'swagger-ui-test-token'

async function tryOperation (page: Page, operationId: string, fill: (operation: string) => Promise<void>) {
  const operation = `#operations-plants-${operationId}`
  await page.click(`${operation} .opblock-summary`)
  const tryItOut = page.locator(`${operation} button.try-out__btn:not(.cancel)`)
  if (await tryItOut.isVisible()) await tryItOut.click()
  await fill(operation)
  await page.click(`${operation} button.execute`)
  const status = page.locator(`${operation} .live-responses-table .response .response-col_status`).first()
  await status.waitFor()
  const body = page.locator(`${operation} .live-responses-table .response-col_description pre.microlight`).first()
  return { status: (await status.innerText()).trim(), body: await body.innerText() }
}

describe('Swagger UI in a real browser', () => {
  it('lets a user authorize, create a plant with "Try it out" and read it back', { timeout: 60_000 }, async () => {
    const chromiumBuild = await findChromium()
    const server = await startServer({ DATABASE_URL: `sqlite:${join(temporaryFolder(), 'ui.db')}`, PLANTSTORE_TOKENS: TOKEN })
    const browser = await chromium.launch({
      executablePath: chromiumBuild.executablePath,
      args: HEADLESS_CHROMIUM_ARGS
    })
    onTestFinished(() => browser.close())
    const page = await browser.newPage({ viewport: { width: 1280, height: 2000 } })
    const pageErrors: string[] = []
    page.on('pageerror', (error) => pageErrors.push(error.message))

    await page.goto(`${server.baseUrl}/docs`)
    await page.click('button.authorize')
    await page.fill('.modal-ux input[type="text"]', TOKEN)
    await page.click('.modal-ux button.authorize')
    await page.click('.modal-ux button.btn-done')
    const created = await tryOperation(page, 'createPlant', async (operation) => {
      await page.fill(`${operation} textarea.body-param__text`, '{"id": 9007199254740993, "name": "Swagger fern", "tag": "ui"}')
    })
    const readOnTheWire = page.waitForResponse((response) => response.url().endsWith('/plants/9007199254740993'))
    const read = await tryOperation(page, 'getPlant', async (operation) => {
      await page.fill(`${operation} input[placeholder="id"]`, '9007199254740993')
    })
    const readBytes = await (await readOnTheWire).text()
    mkdirSync(ARTIFACTS, { recursive: true })
    await page.screenshot({ path: new URL('swagger-ui.png', ARTIFACTS).pathname, fullPage: true })
    const stored = await fetch(`${server.baseUrl}/plants/9007199254740993`, { headers: { authorization: `Bearer ${TOKEN}` } })

    expect(created.status).toBe('200')
    expect(JSON.parse(created.body)).toEqual({ name: 'Swagger fern', tag: 'ui' })
    expect(read.status).toBe('200')
    expect(read.body).toContain('"name": "Swagger fern"')
    // The browser receives every digit; Swagger UI's pretty-printer (JavaScript numbers) shows ids
    // above 2^53 rounded, which the README points out.
    expect(readBytes).toBe('{"id":9007199254740993,"name":"Swagger fern","tag":"ui"}')
    expect(await stored.text()).toBe('{"id":9007199254740993,"name":"Swagger fern","tag":"ui"}')
    expect(pageErrors).toEqual([])
  })
})
