/**
 * Runs the examples of the HTTP reference, docs/reference/api/*.md, the way doctest runs a Python manual.
 * Each page's ```http request blocks are sent, in page order, to a server of the page's own, listening on
 * a socket over one fresh SQLite file, and each answer is compared with the ```http response block after
 * it: the status line, each header the page shows (only those), and the body (as JSON when the answer is
 * JSON, else as text; a body shown as `…` is not compared, and a response shown without a body must have
 * none).
 *
 * `$NAME` is a placeholder. `$TOKEN` and `$ADMIN_TOKEN` are the tokens configured below. In an answer,
 * a `$NAME` not seen before on the page stands for any value (an id, a time, a secret the server makes)
 * and keeps it under that name; everywhere else `$NAME` is the value it holds.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { DEFAULT_WEBHOOK_CONFIG } from '../../src/config.js'
import { parseExactJson } from '../../src/exact-json.js'
import { backends, buildTestApp } from '../helpers/app.js'
import { httpExamplesOf, type HttpMessage } from '../helpers/http-examples.js'

const FOLDER = 'docs/reference/api'
const PAGES = readdirSync(FOLDER).filter((name) => name.endsWith('.md')).sort().map((name) => `${FOLDER}/${name}`)
/** How many examples the reference held when it was one page (docs/api.md, release 1.7.0): none may be lost. */
const EXAMPLES_AT_LEAST = 80
const PLANTS_TOKEN = 'api-examples-gardener-token'
const ADMIN_TOKEN = 'api-examples-ops-token'
/** The server the pages describe: BODY_LIMIT=128, WEBHOOK_DELIVERY=false, these PLANTSTORE_TOKENS. */
const SERVER_TOKENS = [`name=gardener;scopes=plants:read+plants:write;${PLANTS_TOKEN}`, `name=ops;scopes=admin;${ADMIN_TOKEN}`]
const SERVER_CONFIG = { bodyLimit: 128, webhooks: { ...DEFAULT_WEBHOOK_CONFIG, deliver: false } }
const NOT_COMPARED = '…'
const PLACEHOLDER = /\$([A-Z][A-Z0-9_]*)/

type Values = Map<string, string>

interface Answer {
  readonly statusLine: string
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  readonly body: string
}

const examplesOf = (page: string) => httpExamplesOf(page, readFileSync(page, 'utf8'))

describe('the examples of docs/reference/api/', () => {
  it(`still number at least ${EXAMPLES_AT_LEAST}, on pages that all have some`, () => {
    const counts = PAGES.map((page) => [page, examplesOf(page).length] as const)
    expect(counts.filter(([, count]) => count === 0), 'pages without an example').toEqual([])
    expect(counts.reduce((sum, [, count]) => sum + count, 0)).toBeGreaterThanOrEqual(EXAMPLES_AT_LEAST)
  })

  it.each(PAGES)('%s: answers every example as the page shows it, in page order, on a fresh SQLite store', async (page) => {
    const examples = examplesOf(page)
    const sqlite = backends.find((backend) => backend.name === 'sqlite')
    if (sqlite === undefined) throw new Error('test/helpers/app.ts has no sqlite backend')
    const app = await buildTestApp({ store: await sqlite.open(), tokens: SERVER_TOKENS, config: SERVER_CONFIG })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    const values: Values = new Map([['TOKEN', PLANTS_TOKEN], ['ADMIN_TOKEN', ADMIN_TOKEN]])
    // Keep-alive, as most clients: a `Connection: close` shown on a page is then the server's own doing.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    onTestFinished(() => agent.destroy())

    for (const { request: shownRequest, response: shown } of examples) {
      const answer = await send(agent, port, page, shownRequest, values)
      const actual = {
        statusLine: answer.statusLine,
        headers: Object.fromEntries(shown.headers.map(([name]) => [name, headerText(answer.headers[name.toLowerCase()])])),
        body: shown.body === NOT_COMPARED ? NOT_COMPARED : bodyOf(answer)
      }
      const expected = {
        statusLine: shown.startLine,
        headers: Object.fromEntries(shown.headers.map(([name, value]) => [name, fill(value, actual.headers[name], values)])),
        body: shown.body === NOT_COMPARED ? NOT_COMPARED : fillBody(page, shown, actual.body, values)
      }
      expect.soft(actual, `${page}:${shownRequest.line} ${shownRequest.startLine}`).toEqual(expected)
    }
  }, 60_000)
})

/** Sends a request as the page shows it, its placeholders filled in, plus Host, Content-Length and Connection. */
async function send (agent: Agent, port: number, page: string, shown: HttpMessage, values: Values): Promise<Answer> {
  const [method, target] = shown.startLine.split(' ')
  if (method === undefined || target === undefined) throw new Error(`${page}:${shown.line}: not a request line: ${shown.startLine}`)
  const body = substitute(shown.body, values, page, shown.line)
  const headers: Record<string, string> = {}
  for (const [name, value] of shown.headers) headers[name] = substitute(value, values, page, shown.line)
  if (body !== '') headers['Content-Length'] = String(Buffer.byteLength(body))
  return await new Promise((resolve, reject) => {
    const outgoing = request({ host: '127.0.0.1', port, method, path: substitute(target, values, page, shown.line), headers, agent }, (incoming) => {
      let text = ''
      incoming.setEncoding('utf8')
      incoming.on('data', (chunk: string) => { text += chunk })
      incoming.on('end', () => resolve({ statusLine: `HTTP/1.1 ${incoming.statusCode} ${incoming.statusMessage}`, headers: incoming.headers, body: text }))
      incoming.on('error', reject)
    })
    outgoing.on('error', reject)
    outgoing.end(body)
  })
}

function substitute (text: string, values: Values, page: string, line: number): string {
  return text.replace(new RegExp(PLACEHOLDER, 'g'), (_placeholder, name: string) => {
    const value = values.get(name)
    if (value === undefined) throw new Error(`${page}:${line}: $${name} is used before an answer gives it a value`)
    return value
  })
}

function headerText (value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value
}

/** The answer's body as the page compares it: a JSON value when it is JSON (integers kept exact), else its text. */
function bodyOf (answer: Answer): unknown {
  const isJson = /^application\/([a-z.+-]+\+)?json\b/.test(headerText(answer.headers['content-type']) ?? '')
  return isJson && answer.body !== '' ? parseExactJson(answer.body) : answer.body
}

function fillBody (page: string, shown: HttpMessage, actual: unknown, values: Values): unknown {
  // A page cannot show a block's last line feed: an NDJSON body shown has one after each of its lines.
  const ndjson = shown.headers.some(([name, value]) => name.toLowerCase() === 'content-type' && value === 'application/x-ndjson')
  if (ndjson && shown.body !== '') return fill(`${shown.body}\n`, actual, values)
  if (typeof actual === 'string' || shown.body === '') return fill(shown.body, actual, values)
  let template: unknown
  try {
    template = parseExactJson(shown.body)
  } catch (error) {
    throw new Error(`${page}:${shown.line}: the answer is JSON, but the body shown is not: ${String(error)}`)
  }
  return fillJson(template, actual, values)
}

function fillJson (template: unknown, actual: unknown, values: Values): unknown {
  if (typeof template === 'string') return fill(template, actual, values)
  if (Array.isArray(template)) return template.map((item, index) => fillJson(item, Array.isArray(actual) ? actual[index] : undefined, values))
  if (template === null || typeof template !== 'object') return template
  const fields = actual !== null && typeof actual === 'object' ? actual as Record<string, unknown> : {}
  return Object.fromEntries(Object.entries(template).map(([key, value]) => [key, fillJson(value, fields[key], values)]))
}

/**
 * The shown text with its placeholders filled in from `actual` when `actual` matches it (keeping the
 * values of the new ones), else the shown text itself, so that the comparison fails and shows both.
 */
function fill (shown: string, actual: unknown, values: Values): string {
  if (!PLACEHOLDER.test(shown) || typeof actual !== 'string') return shown
  const parts = shown.split(PLACEHOLDER)
  const captured: string[] = []
  const pattern = parts.map((part, index) => {
    if (index % 2 === 0) return escapeRegExp(part)
    const known = values.get(part)
    if (known !== undefined) return escapeRegExp(known)
    if (captured.includes(part)) return `\\${captured.indexOf(part) + 1}`
    captured.push(part)
    return '(.+?)'
  }).join('')
  const match = new RegExp(`^${pattern}$`, 's').exec(actual)
  if (match === null) return shown
  captured.forEach((name, index) => values.set(name, match[index + 1] as string))
  return actual
}

function escapeRegExp (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
