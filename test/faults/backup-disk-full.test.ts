import { spawn } from 'node:child_process'
import { mkdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { temporaryFolder } from '../helpers/app.js'
import { outputOf, type ChildOutput } from '../helpers/child-output.js'
import { CLI } from '../helpers/cli-process.js'
import { makeStore } from '../transfer/sqlite-stores.js'

/**
 * The disk filling during `plantstore backup` and `restore`: the command runs in a mount namespace of
 * its own (`unshare --mount`, as root) where a 1 MB tmpfs is mounted on the folder `full`. The mount
 * exists only in that namespace and ends with it; no other mount is touched. What the namespace's
 * folder holds afterwards is listed from inside it, after the command.
 */
function inFullDisk (folder: string, script: string, env: Record<string, string>): Promise<ChildOutput> {
  mkdirSync(join(folder, 'full'))
  const setUp = 'mount -t tmpfs -o size=1m plantstore-full-disk full'
  return outputOf(spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', `${setUp} && ${script}`], {
    cwd: folder, env: { PATH: process.env.PATH ?? '', PLANTSTORE: `${process.execPath} ${CLI}`, ...env }, stdio: ['ignore', 'pipe', 'pipe']
  }))
}

describe('A full disk', () => {
  it('during a backup: one line, exit 1, the partial copy removed, no file under the final name', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'plants.db'), 30_000)
    const size = (statSync(join(folder, 'plants.db')).size / 1e6).toFixed(1)

    // `ls -A full` prints nothing for an empty folder: stdout has the exit code alone.
    const run = await inFullDisk(folder, '$PLANTSTORE backup full/backup.db; echo "exit $?"; ls -A full', { DATABASE_URL: 'sqlite:plants.db' })

    expect(Number(size)).toBeGreaterThan(1)
    expect(run).toEqual({
      code: 0,
      stdout: 'exit 1\n',
      stderr: `plantstore: the disk is full: the backup of plants.db (${size} MB) did not fit in full; the partial copy was removed and full/backup.db was not written\n`
    })
  })

  it('during a restore: one line, exit 1, the partial copy removed, the store as it was', async () => {
    const folder = temporaryFolder()
    makeStore(join(folder, 'backup.db'), 30_000)
    makeStore(join(folder, 'small.db'), 2)
    const size = (statSync(join(folder, 'backup.db')).size / 1e6).toFixed(1)

    const run = await inFullDisk(folder,
      'cp small.db full/plants.db && sha256sum full/plants.db small.db && $PLANTSTORE restore backup.db --force; echo "exit $?"; ls -A full && sha256sum full/plants.db',
      { DATABASE_URL: 'sqlite:full/plants.db' })
    const [before, small, exit, listing, after] = run.stdout.trimEnd().split('\n')

    expect(run.code).toBe(0)
    expect(run.stderr).toBe(`plantstore: the disk is full: the restored store (${size} MB or more) did not fit in full; ` +
      'the partial copy was removed and full/plants.db was left as it was\n')
    expect([exit, listing]).toEqual(['exit 1', 'plants.db'])
    expect(before?.split(' ')[0]).toBe(small?.split(' ')[0])
    expect(after).toBe(before)
  })
})
