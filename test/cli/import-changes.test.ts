import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { ChangeRecord } from '../../src/store/change-log.js'
import { openStore } from '../../src/store/open-store.js'
import { temporaryFolder, TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import { runCli } from '../helpers/cli-process.js'
import { createTestDatabase } from '../helpers/postgres-database.js'

/** `plantstore import` as a real process records each plant it changes in the change log, made by `cli`, like any write. */

const stores = [
  { name: 'SQLite', databaseUrl: async (folder: string) => `sqlite:${join(folder, 'plants.db')}` },
  { name: 'PostgreSQL', databaseUrl: async () => createTestDatabase() }
]

async function changesAt (databaseUrl: string): Promise<Array<Omit<ChangeRecord, 'at'>>> {
  const store = await openStore(databaseUrl, TEST_POSTGRES_OPTIONS)
  try {
    const page = await store.changes.read({ after: 0n, limit: 100, keptSince: 0 })
    if (page.status !== 'page') throw new Error('the log expired')
    return page.changes.map(({ at, ...change }) => change)
  } finally {
    await store.close()
  }
}

for (const { name, databaseUrl } of stores) {
  describe(`plantstore import on ${name}: the change log`, () => {
    it('records a created change per new plant and an updated one per replaced plant, by cli; a line that changes nothing records none', async () => {
      const cwd = temporaryFolder()
      const env = { DATABASE_URL: await databaseUrl(cwd) }
      const importLines = (lines: readonly string[], ...options: string[]) => {
        writeFileSync(join(cwd, 'plants.ndjson'), lines.map((line) => `${line}\n`).join(''))
        return runCli(['import', 'plants.ndjson', ...options], { cwd, env })
      }

      const first = await importLines(['{"id":1,"name":"Fern","tag":"shade"}', '{"id":9223372036854775807,"name":"Ivy"}'])
      const second = await importLines(['{"id":1,"name":"Fern","tag":"sun"}', '{"id":9223372036854775807,"name":"Ivy"}', '{"id":-5,"name":"Moss"}'],
        '--on-conflict=replace')

      expect([first.code, first.stderr, second.code, second.stderr]).toEqual([0, '', 0, ''])
      // An import writes a window of lines at once: the changes of one import may be numbered in any order.
      const changes = await changesAt(env.DATABASE_URL)
      const byId = (changes: ReadonlyArray<Omit<ChangeRecord, 'at' | 'seq'>>) => [...changes].sort((a, b) => a.id < b.id ? -1 : 1)
      expect(changes.map((change) => change.seq)).toEqual([1n, 2n, 3n, 4n])
      expect(byId(changes.slice(0, 2).map(({ seq, ...change }) => change))).toEqual([
        { type: 'plant.created', id: 1n, plant: { id: 1n, name: 'Fern', tag: 'shade' }, by: 'cli' },
        { type: 'plant.created', id: 9223372036854775807n, plant: { id: 9223372036854775807n, name: 'Ivy' }, by: 'cli' }
      ])
      expect(byId(changes.slice(2).map(({ seq, ...change }) => change))).toEqual([
        { type: 'plant.created', id: -5n, plant: { id: -5n, name: 'Moss' }, by: 'cli' },
        { type: 'plant.updated', id: 1n, plant: { id: 1n, name: 'Fern', tag: 'sun' }, by: 'cli', leftTag: 'shade' }
      ])
    })
  })
}
