import { writeFile } from 'node:fs/promises'
import { buildApp } from './app.js'
import { AccessTokenRegistry } from './auth/token-registry.js'
import { openMemoryStore } from './store/memory/store.js'

/** `npm run openapi`: writes the document the app serves to openapi/openapi.json. */
async function renderOpenApiDocument (): Promise<string> {
  const store = openMemoryStore()
  const app = await buildApp(
    { bodyLimit: 16384, logLevel: 'silent', prettyLogs: false },
    { store, accessTokens: new AccessTokenRegistry(store.tokens) })
  try {
    return `${JSON.stringify(app.swagger(), null, 2)}\n`
  } finally {
    await app.close()
  }
}

const target = new URL('../openapi/openapi.json', import.meta.url)
await writeFile(target, await renderOpenApiDocument())
process.stdout.write(`wrote ${target.pathname}\n`)
