import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { RESTORE_SEQ_GAP } from '../../src/store/sqlite/restore.js'
import { temporaryFolder } from '../helpers/app.js'
import { runCli } from '../helpers/cli-process.js'
import { changeLogAt, FIRST_SEQ, HISTORY_IDS, lastChangeOf, startLogPastDoubles, withStore, writeHistory } from './change-logs.js'

/**
 * `plantstore backup` and `restore` carry the change log of a SQLite store (the backup is the whole
 * file): every kept change and its history. A restore goes back in time, so the restored log numbers on
 * RESTORE_SEQ_GAP above the backup's head and answers every earlier resume point 410: no client that
 * read a change made after the backup resumes past changes it never saw. PostgreSQL's backups are
 * pg_dump's, which copy the change log's tables with the rest.
 */
describe('plantstore backup and restore: the change log', () => {
  it('restored, a store keeps the histories, expires every resume point before the restore, and numbers its next change past the gap', async () => {
    const folder = temporaryFolder()
    const source = `sqlite:${join(folder, 'plants.db')}`
    const target = `sqlite:${join(folder, 'restored.db')}`
    startLogPastDoubles(join(folder, 'plants.db'))
    await withStore(source, writeHistory)

    const backedUp = await runCli(['backup', 'backup.db'], { cwd: folder, env: { DATABASE_URL: source } })
    const restored = await runCli(['restore', 'backup.db'], { cwd: folder, env: { DATABASE_URL: target } })
    const [before, after] = [await changeLogAt(source, HISTORY_IDS), await changeLogAt(target, HISTORY_IDS)]
    const backupHead = before.extent.head
    const resumedBefore = await withStore(target, async (store) => Promise.all([0n, backupHead - 1n, backupHead, backupHead + 1n]
      .map(async (resumeAfter) => (await store.changes.read({ after: resumeAfter, limit: 10, keptSince: 0 })).status)))
    const next = await withStore(target, async (store) => {
      await store.create({ id: 8n, name: 'After the restore' }, 'jwt:erin')
      return lastChangeOf(store, 8n)
    })

    expect({ code: backedUp.code, stderr: backedUp.stderr }).toEqual({ code: 0, stderr: '' })
    expect({ code: restored.code, stderr: restored.stderr }).toEqual({ code: 0, stderr: '' })
    expect(before.extent).toEqual({ head: FIRST_SEQ + 8n, kept: 6, oldestSeq: FIRST_SEQ + 3n })
    const restoredHead = FIRST_SEQ + 8n + RESTORE_SEQ_GAP
    expect(after.extent).toEqual({ head: restoredHead, kept: 0, oldestSeq: undefined })
    expect(after.histories).toEqual(before.histories)
    expect(resumedBefore).toEqual(['expired', 'expired', 'expired', 'expired'])
    expect(next).toMatchObject({ seq: restoredHead + 1n, type: 'plant.created', id: 8n, by: 'jwt:erin' })
  })
})
