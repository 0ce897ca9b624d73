import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { openStore } from '../../src/store/open-store.js'
import { temporaryFolder, TEST_POSTGRES_OPTIONS } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import {
  addChanges, changeLogAt, FIRST_SEQ, HISTORY_IDS, INT64_MAX, lastChangeOf, startLogPastDoubles, withStore, writeHistory
} from './change-logs.js'
import { copy, expectFailure, markerOf, postgresQuery, shown, startCli, summaryLine, untilCopying } from './copy-fixtures.js'

/**
 * `plantstore copy` carries the change log (docs/reference/api/changes.md): every kept change with its
 * `seq`, the head and what was pruned, so that a client's resume point and each plant's history survive
 * a move, and the target numbers its next change after the source's last. Real processes, real stores.
 */

const RESUMED = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z'

async function sqliteSourceWithHistory (folder: string): Promise<string> {
  const file = join(folder, 'source.db')
  startLogPastDoubles(file)
  await withStore(`sqlite:${file}`, writeHistory)
  return `sqlite:${file}`
}

describe('plantstore copy: the change log', () => {
  it('moves SQLite → PostgreSQL → SQLite with every page, resume point, tag, history, head and extent the same, exact past 2^53; ' +
    'each target numbers its next change after the source\'s head', { timeout: 60_000 }, async () => {
    const folder = temporaryFolder()
    const source = await sqliteSourceWithHistory(folder)
    const postgres = await createTestDatabase()
    const back = `sqlite:${join(folder, 'back.db')}`

    const there = await copy(source, postgres, folder)
    const atSource = await changeLogAt(source, HISTORY_IDS)
    const atPostgres = await changeLogAt(postgres, HISTORY_IDS)
    const written = await withStore(postgres, async (store) => {
      await store.create({ id: 6n, name: 'After the move' }, 'jwt:carol')
      return lastChangeOf(store, 6n)
    })
    const andBack = await copy(postgres, back, folder)
    const ids = [...HISTORY_IDS, 6n]
    const [atPostgresAfter, atBack] = [await changeLogAt(postgres, ids), await changeLogAt(back, ids)]
    const writtenBack = await withStore(back, async (store) => {
      await store.delete(1n, undefined, 'jwt:dave')
      return { change: await lastChangeOf(store, 1n), extent: await store.changes.extent() }
    })

    expect({ code: there.code, stderr: there.stderr }).toEqual({ code: 0, stderr: '' })
    expect(there.stdout).toMatch(summaryLine({ plants: 3, changes: 6 }, source, shown(postgres)))
    expect(atSource.head).toBe(FIRST_SEQ + 8n)
    expect(atSource.extent).toEqual({ head: FIRST_SEQ + 8n, kept: 6, oldestSeq: FIRST_SEQ + 3n })
    expect(atSource.resumed[0]).toEqual([0n, { status: 'expired' }])
    expect(atSource.pages.flatMap((page) => page.status === 'page' ? page.changes.map((change) => [change.seq, change.type, change.id, change.by]) : [])).toEqual([
      [FIRST_SEQ + 3n, 'plant.updated', 1n, 'jwt:bob'],
      [FIRST_SEQ + 4n, 'plant.updated', INT64_MAX, 'jwt:alice'],
      [FIRST_SEQ + 5n, 'plant.created', 9007199254740993n, 'jwt:alice'],
      [FIRST_SEQ + 6n, 'plant.deleted', -9223372036854775808n, 'ops'],
      [FIRST_SEQ + 7n, 'plant.created', 5n, 'batcher'],
      [FIRST_SEQ + 8n, 'plant.deleted', INT64_MAX, 'batcher']
    ])
    expect(atSource.shade.map((change) => change.seq)).toEqual([FIRST_SEQ + 3n, FIRST_SEQ + 4n, FIRST_SEQ + 7n, FIRST_SEQ + 8n])
    expect(atPostgres).toEqual(atSource)
    expect(written).toMatchObject({ seq: FIRST_SEQ + 9n, type: 'plant.created', by: 'jwt:carol' })

    expect({ code: andBack.code, stderr: andBack.stderr }).toEqual({ code: 0, stderr: '' })
    expect(andBack.stdout).toMatch(summaryLine({ plants: 4, changes: 7 }, shown(postgres), back))
    expect(atPostgresAfter.head).toBe(FIRST_SEQ + 9n)
    expect(atBack).toEqual(atPostgresAfter)
    expect(writtenBack.change).toMatchObject({ seq: FIRST_SEQ + 10n, type: 'plant.deleted', by: 'jwt:dave' })
    expect(writtenBack.extent).toEqual({ head: FIRST_SEQ + 10n, kept: 8, oldestSeq: FIRST_SEQ + 3n })
  })

  it('interrupted by kill -9 (SQLite → PostgreSQL) and by Ctrl-C (PostgreSQL → SQLite) among the changes, carries each change ' +
    'exactly once when the same command runs again', { timeout: 120_000 }, async () => {
    const folder = temporaryFolder()
    const file = join(folder, 'source.db')
    startLogPastDoubles(file)
    addChanges(file, 100_000)
    const source = `sqlite:${file}`
    const postgres = await createTestDatabase()
    const back = `sqlite:${join(folder, 'back.db')}`
    const ids = [1n, 2n, 99_999n, INT64_MAX - 7n, -9223372036854775807n + 1n]
    const resumed = (from: string, to: string) => summaryLine({ changes: 100_000 }, from, to, '; this run finished the copy started ', RESUMED)

    const killed = startCli(['copy', '--from', source, '--to', postgres], folder)
    await untilCopying(postgres, 'plant_changes')
    process.kill(killed.child.pid as number, 'SIGKILL')
    expect((await killed.done).signal).toBe('SIGKILL')
    const atKill = await postgresQuery<{ count: string }>(postgres, 'SELECT count(*) FROM plant_changes')
    const afterKill = await copy(source, postgres, folder)

    const interrupted = startCli(['copy', '--from', postgres, '--to', back], folder)
    await untilCopying(back, 'plant_changes')
    process.kill(interrupted.child.pid as number, 'SIGINT')
    const interruptedRun = await interrupted.done
    const markerAtInterruption = await markerOf(back)
    const afterInterruption = await copy(postgres, back, folder)

    expect(Number(atKill[0]?.count)).toBeGreaterThan(0)
    expect(Number(atKill[0]?.count)).toBeLessThan(100_000)
    expect({ code: afterKill.code, stderr: afterKill.stderr }).toEqual({ code: 0, stderr: '' })
    expect(afterKill.stdout).toMatch(resumed(source, shown(postgres)))
    expect(interruptedRun.code).toBe(130)
    expect(markerAtInterruption).toMatchObject({ copying: 'plant_changes', finished_at: null })
    expect({ code: afterInterruption.code, stderr: afterInterruption.stderr }).toEqual({ code: 0, stderr: '' })
    expect(afterInterruption.stdout).toMatch(resumed(shown(postgres), back))
    const expected = await changeLogAt(source, ids, 1000)
    expect(expected.extent).toEqual({ head: FIRST_SEQ + 99_999n, kept: 100_000, oldestSeq: FIRST_SEQ })
    expect(expected.pages.reduce((count, page) => count + (page.status === 'page' ? page.changes.length : 0), 0)).toBe(100_000)
    expect(await changeLogAt(postgres, ids, 1000)).toEqual(expected)
    expect(await changeLogAt(back, ids, 1000)).toEqual(expected)
  })

  it('refuses a target whose log numbered a change; --merge adds the source\'s changes above the target\'s head only, ' +
    'skips those it holds, and reports the others', { timeout: 30_000 }, async () => {
    const folder = temporaryFolder()
    const source = `sqlite:${join(folder, 'source.db')}`
    const target = `sqlite:${join(folder, 'target.db')}`
    const create = (url: string, ...ids: bigint[]) => withStore(url, async (store) => {
      for (const id of ids) await store.create({ id, name: `Plant ${id}` }, `jwt:${url === source ? 'source' : 'target'}`)
    })
    await create(source, 1n, 2n, 3n)
    const first = await copy(source, target, folder)
    await create(source, 4n, 5n)

    const refused = await copy(source, target, folder)
    const caughtUp = await copy(source, target, folder, '--merge')
    const [atSource, atTarget] = [await changeLogAt(source, [1n, 5n]), await changeLogAt(target, [1n, 5n])]
    await create(target, 6n)
    await create(source, 7n, 8n)
    const diverged = await copy(source, target, folder, '--merge')
    const feed = await withStore(target, async (store) => {
      const page = await store.changes.read({ after: 0n, limit: 100, keptSince: 0 })
      return page.status === 'page' ? page.changes.map((change) => [change.seq, change.id, change.by]) : []
    })
    const store = await openStore(target, TEST_POSTGRES_OPTIONS)
    await store.changes.prune(Date.now() + 1, 1000)
    await store.close()
    const pastPruned = await copy(source, target, folder, '--merge')

    expect(first.stdout).toMatch(summaryLine({ plants: 3, changes: 3 }, source, target))
    expectFailure(refused, new RegExp(`^plantstore: the target ${target} holds data: 3 plants, a change log numbered up to 3 ` +
      `\\(a copy of this store, finished ${RESUMED}\\); nothing was copied: copy into an empty store, or give --merge to add the source's rows to what it holds\\n$`))
    expect({ code: caughtUp.code, stderr: caughtUp.stderr }).toEqual({ code: 0, stderr: '' })
    expect(caughtUp.stdout).toMatch(summaryLine({ plants: 2, changes: 2 }, source, target, '; already in the target as they are, skipped: 3 plants, 3 changes'))
    expect(atTarget).toEqual(atSource)
    expect(diverged.stderr).toBe('plantstore: change 6 (of plant 7): the target holds another version of it; kept the target\'s\n')
    expect(diverged.code).toBe(1)
    expect(diverged.stdout).toMatch(summaryLine({ plants: 2, changes: 1 }, source, target,
      '; already in the target as they are, skipped: 5 plants, 5 changes; kept as the target has them (each listed on stderr when found): 1 change'))
    expect(feed).toEqual([1n, 2n, 3n, 4n, 5n].map((id) => [id, id, 'jwt:source']).concat([[6n, 6n, 'jwt:target'], [7n, 8n, 'jwt:source']]))
    expect(pastPruned.code).toBe(1)
    expect(pastPruned.stderr).toBe([1n, 2n, 3n, 4n, 5n, 7n, 8n].map((id, index) =>
      `plantstore: change ${index + 1} (of plant ${id}): the target's change log has numbered its own changes past it; not copied\n`).join(''))
  })
})
