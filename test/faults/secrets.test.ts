import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { spawnServer, startServer } from '../helpers/server-process.js'

const CONFIGURED = ['first-secret-token-d81f', 'second-secret-token-77ab']
const PRESENTED_WRONG = ['first-secret-token-d81e', 'wrong-but-secret-9c2e']

describe('Secrets stay secret', () => {
  it('no token appears in any log line at trace level, error body, the OpenAPI document or the database files', async () => {
    const folder = temporaryFolder()
    const server = await startServer({
      DATABASE_URL: `sqlite:${join(folder, 'secrets.db')}`,
      PLANTSTORE_TOKENS: `${CONFIGURED[0]},sha256:${'0'.repeat(64)},${CONFIGURED[1]}`,
      LOG_LEVEL: 'trace'
    })
    const bodies: string[] = []
    const send = async (path: string, init: RequestInit) => {
      const response = await fetch(`${server.baseUrl}${path}`, init)
      bodies.push(JSON.stringify([...response.headers]), await response.text())
    }
    const json = { 'content-type': 'application/json' }

    for (const token of [...CONFIGURED, ...PRESENTED_WRONG]) {
      await send('/plants', { method: 'POST', headers: { ...json, authorization: `Bearer ${token}` }, body: '{"id":1,"name":"Fern"}' })
      await send('/plants', { method: 'POST', headers: { ...json, authorization: `Bearer ${token}` }, body: '{"id":' })
      await send('/plants/abc', { headers: { authorization: `Bearer ${token}` } })
      await send('/plants', { method: 'PUT', headers: { authorization: `bearer ${token}` } })
      await send('/plants', { method: 'POST', headers: { ...json, authorization: `Basic ${token}` }, body: '{}' })
    }
    await send('/openapi.json', {})
    process.kill(server.child.pid as number, 'SIGTERM')
    await server.exited
    const files = readdirSync(folder).map((file) => readFileSync(join(folder, file)).toString('latin1'))

    const everything = [server.stdout(), server.stderr(), ...bodies, ...files].join('\n')
    expect(server.stdout().split('\n').length).toBeGreaterThan(20)
    for (const token of [...CONFIGURED, ...PRESENTED_WRONG]) expect(everything).not.toContain(token)
  })

  it('a configuration error names the variable but never echoes a token', async () => {
    const server = spawnServer({ PLANTSTORE_TOKENS: 'good-token,secret value with spaces', DATABASE_URL: 'memory:' })

    expect(await server.exited).toBe(1)
    expect(server.stderr()).toContain('PLANTSTORE_TOKENS entry 2')
    expect(server.stderr()).not.toContain('secret value')
    expect(server.stderr()).not.toContain('good-token')
  })
})
