import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.js'
import { temporaryFolder } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/postgres-database.js'
import { addPlants, copy, exportDigest, markerOf, shown, startCli, summaryLine, untilCopyingPlants } from '../transfer/copy-fixtures.js'

const PLANTS = 200_000

describe('plantstore copy while the target PostgreSQL stops', () => {
  it('fails with one line saying how to finish, keeps what it committed, and the same command finishes the copy once PostgreSQL is back',
    { timeout: 120_000 }, async () => {
      const postgres = await startEmbeddedPostgres()
      onTestFinished(() => postgres.destroy())
      const target = await createTestDatabase(postgres.adminUrl)
      const folder = temporaryFolder()
      const source = `sqlite:${join(folder, 'source.db')}`
      addPlants(join(folder, 'source.db'), PLANTS)

      const running = startCli(['copy', '--from', source, '--to', target], folder)
      await untilCopyingPlants(target)
      // SIGQUIT to the postmaster is PostgreSQL's immediate shutdown (pg_ctl stop -m immediate).
      process.kill(postgres.pid() as number, 'SIGQUIT')
      const failed = await running.done
      await postgres.start()
      const marker = await markerOf(target)
      const finished = await copy(source, target, folder)

      expect({ code: failed.code, stdout: failed.stdout }).toEqual({ code: 1, stdout: '' })
      expect(failed.stderr).toMatch(new RegExp(`^plantstore: the target ${shown(target).replace(/[./]/g, '\\$&')}: PostgreSQL is unavailable \\([^\\n]+\\); ` +
        'the rows copied so far are kept: run the same command again to finish the copy\\n$'))
      expect(marker).toMatchObject({ copying: 'plants', finished_at: null })
      expect({ code: finished.code, stderr: finished.stderr }).toEqual({ code: 0, stderr: '' })
      expect(finished.stdout).toMatch(summaryLine({ plants: PLANTS }, source, shown(target), '; this run finished the copy started ',
        '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z'))
      const expected = await exportDigest(source)
      expect(expected.lines).toBe(PLANTS)
      expect(await exportDigest(target)).toEqual(expected)
    })
})
