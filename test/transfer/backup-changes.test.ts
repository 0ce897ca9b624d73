import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { runCli } from '../helpers/cli-process.js'
import { changeLogAt, FIRST_SEQ, HISTORY_IDS, lastChangeOf, startLogPastDoubles, withStore, writeHistory } from './change-logs.js'

/**
 * `plantstore backup` and `restore` carry the change log of a SQLite store (the backup is the whole
 * file): every kept change, the head and what was pruned, so that resume points and histories survive.
 * PostgreSQL's backups are pg_dump's, which copy the change log's tables with the rest.
 */
describe('plantstore backup and restore: the change log', () => {
  it('restored, a store serves the same pages, resume points, histories, head and extent, and numbers its next change after the head', async () => {
    const folder = temporaryFolder()
    const source = `sqlite:${join(folder, 'plants.db')}`
    const target = `sqlite:${join(folder, 'restored.db')}`
    startLogPastDoubles(join(folder, 'plants.db'))
    await withStore(source, writeHistory)

    const backedUp = await runCli(['backup', 'backup.db'], { cwd: folder, env: { DATABASE_URL: source } })
    const restored = await runCli(['restore', 'backup.db'], { cwd: folder, env: { DATABASE_URL: target } })
    const [before, after] = [await changeLogAt(source, HISTORY_IDS), await changeLogAt(target, HISTORY_IDS)]
    const next = await withStore(target, async (store) => {
      await store.create({ id: 8n, name: 'After the restore' }, 'jwt:erin')
      return lastChangeOf(store, 8n)
    })

    expect({ code: backedUp.code, stderr: backedUp.stderr }).toEqual({ code: 0, stderr: '' })
    expect({ code: restored.code, stderr: restored.stderr }).toEqual({ code: 0, stderr: '' })
    expect(before.extent).toEqual({ head: FIRST_SEQ + 8n, kept: 6, oldestSeq: FIRST_SEQ + 3n })
    expect(after).toEqual(before)
    expect(next).toMatchObject({ seq: FIRST_SEQ + 9n, type: 'plant.created', id: 8n, by: 'jwt:erin' })
  })
})
