import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { runCli } from '../helpers/cli-process.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { startServer } from '../helpers/server-process.js'

/**
 * `plantstore tokens create` and `revoke` return only once a running service has read the change: a
 * token is used the moment the command exits, as a CI job does. A service reads the store's tokens every
 * second (PostgreSQL also notifies it), so a command that did not wait would see its token refused (or a
 * revoked one accepted) for up to a second: two rounds make passing by chance unlikely.
 */
const ADMIN_TOKEN = 'take-effect-admin-token-5b1d93e2'

const backends = [
  { name: 'SQLite', databaseUrl: async () => `sqlite:${join(temporaryFolder(), 'plants.db')}` },
  { name: 'PostgreSQL', databaseUrl: () => createTestDatabase() }
]

async function statusWith (baseUrl: string, token: string): Promise<number> {
  const response = await fetch(`${baseUrl}/plants`, { headers: { authorization: `Bearer ${token}` } })
  await response.arrayBuffer()
  return response.status
}

describe.each(backends)('plantstore tokens against a running service on $name', ({ databaseUrl }) => {
  it('When tokens create exits, Then the service accepts the token at once; When tokens revoke exits, Then it refuses it at once', async () => {
    const env = { DATABASE_URL: await databaseUrl(), PLANTSTORE_TOKENS: `name=ops;scopes=admin;${ADMIN_TOKEN}` }
    const server = await startServer(env)
    const cwd = temporaryFolder()

    const rounds = []
    for (const name of ['first', 'second']) {
      const created = await runCli(['tokens', 'create', '--name', name, '--scopes', 'plants:read', '--json'], { cwd, env })
      const { token } = JSON.parse(created.stdout) as { token: string }
      const afterCreate = await statusWith(server.baseUrl, token)
      const revoked = await runCli(['tokens', 'revoke', name], { cwd, env })
      const afterRevoke = await statusWith(server.baseUrl, token)
      rounds.push({ created: created.code, afterCreate, revoked: revoked.code, afterRevoke })
    }

    expect(rounds).toEqual([
      { created: 0, afterCreate: 200, revoked: 0, afterRevoke: 401 },
      { created: 0, afterCreate: 200, revoked: 0, afterRevoke: 401 }
    ])
  })
})
