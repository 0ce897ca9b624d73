import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

/** Debian's PostgreSQL server binaries, of the newest major version installed (scripts/topologies/install-tools.sh installs them). */
export const POSTGRES_BIN = (() => {
  const majors = readdirSync('/usr/lib/postgresql').filter((major) => existsSync(join('/usr/lib/postgresql', major, 'bin', 'initdb')))
  const newest = majors.sort((a, b) => Number(b) - Number(a))[0]
  if (newest === undefined) throw new Error('no PostgreSQL server in /usr/lib/postgresql: run scripts/topologies/install-tools.sh')
  return join('/usr/lib/postgresql', newest, 'bin')
})()

const asRoot = process.getuid?.() === 0
/** The server refuses to run as root: as root, every binary runs as the user `postgres` (its ids from the system); otherwise as this user. */
const postgresUser: { uid?: number, gid?: number } = (() => {
  if (!asRoot) return {}
  const ids = (option: string) => Number(spawnSync('id', [option, 'postgres'], { encoding: 'utf8' }).stdout.trim())
  return { uid: ids('-u'), gid: ids('-g') }
})()
const ownedByPostgres = (path: string) => {
  if (postgresUser.uid !== undefined && postgresUser.gid !== undefined) chownSync(path, postgresUser.uid, postgresUser.gid)
}

/** One PostgreSQL server of a topology: a primary or a standby, on 127.0.0.1. */
export interface PostgresServer {
  readonly name: string
  readonly port: number
  readonly dataDirectory: string
  /** The superuser's URL of `database` (default `postgres`), trusted from 127.0.0.1. */
  url (database?: string): string
  /** The postmaster's PID while it runs. */
  pid (): number | undefined
  /** Starts the postmaster and resolves once it accepts connections. */
  start (): Promise<void>
  /** Immediate shutdown (SIGQUIT, `pg_ctl stop -m immediate`): no checkpoint, as a crash. Resolves once it exited. */
  stopImmediately (): Promise<void>
  /** Fast shutdown (SIGINT). Resolves once it exited. */
  stop (): Promise<void>
  /** A standby becomes a primary (`pg_promote`, waiting for it). */
  promote (): Promise<void>
  /** Runs one statement as the superuser. */
  query<Row extends pg.QueryResultRow> (sql: string, values?: unknown[], database?: string): Promise<Row[]>
}

/** A folder of the topology's data directories, readable by the postgres user; `removeAll` stops every server started in it and removes it. */
export interface Cluster {
  /** A new primary: initdb, then started with `settings` (`-c name=value`). */
  primary (name: string, port: number, settings?: Record<string, string>): Promise<PostgresServer>
  /** A streaming standby of `primary` (pg_basebackup -R) whose `application_name` is its name, started. */
  standby (primary: PostgresServer, name: string, port: number, settings?: Record<string, string>): Promise<PostgresServer>
  /** Stops (by PID, immediate shutdown) every server still running and removes the folder. */
  removeAll (): Promise<void>
}

function runAsPostgres (command: string, args: readonly string[]): void {
  const run = spawnSync(join(POSTGRES_BIN, command), args, { ...postgresUser, encoding: 'utf8', env: { PATH: process.env.PATH ?? '', LC_ALL: 'C.UTF-8' } })
  if (run.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${run.status}: ${run.stderr}`)
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Creates an empty cluster folder under the system's temporary folder. */
export function createCluster (): Cluster {
  const folder = mkdtempSync(join(tmpdir(), 'plantstore-topology-'))
  ownedByPostgres(folder)
  const servers: PostgresServer[] = []

  const server = (name: string, port: number, settings: Record<string, string>): PostgresServer => {
    const dataDirectory = join(folder, name)
    let child: ChildProcess | undefined
    let exited: Promise<void> = Promise.resolve()
    let log = ''
    const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`
    const query = async <Row extends pg.QueryResultRow>(sql: string, values: unknown[] = [], database?: string): Promise<Row[]> => {
      const client = new pg.Client({ connectionString: url(database), connectionTimeoutMillis: 2000 })
      await client.connect()
      try {
        return (await client.query<Row>(sql, values)).rows
      } finally {
        await client.end()
      }
    }
    const stopWith = async (signal: NodeJS.Signals) => {
      if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(child.pid, signal)
      await exited
    }
    const handle: PostgresServer = {
      name,
      port,
      dataDirectory,
      url,
      pid: () => (child !== undefined && child.exitCode === null && child.signalCode === null ? child.pid : undefined),
      async start () {
        const options = { port: String(port), listen_addresses: '127.0.0.1', unix_socket_directories: folder, ...settings }
        child = spawn(join(POSTGRES_BIN, 'postgres'), ['-D', dataDirectory, ...Object.entries(options).flatMap(([key, value]) => ['-c', `${key}=${value}`])], {
          ...postgresUser, env: { PATH: process.env.PATH ?? '', LC_ALL: 'C.UTF-8' }, stdio: ['ignore', 'ignore', 'pipe']
        })
        child.stderr?.on('data', (chunk: Buffer) => { log += chunk.toString() })
        const running = child
        exited = new Promise((resolve) => running.once('exit', () => resolve()))
        const deadline = Date.now() + 30_000
        for (;;) {
          try {
            await query('SELECT 1')
            return
          } catch (error) {
            if (running.exitCode !== null || Date.now() > deadline) throw new Error(`PostgreSQL ${name} did not start (${(error as Error).message}):\n${log}`)
            await sleep(100)
          }
        }
      },
      stopImmediately: () => stopWith('SIGQUIT'),
      stop: () => stopWith('SIGINT'),
      async promote () {
        await query('SELECT pg_promote(true, 60)')
      },
      query
    }
    servers.push(handle)
    return handle
  }

  return {
    async primary (name, port, settings = {}) {
      runAsPostgres('initdb', ['-D', join(folder, name), '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'])
      const primary = server(name, port, { wal_level: 'replica', max_wal_senders: '5', ...settings })
      await primary.start()
      return primary
    },
    async standby (primary, name, port, settings = {}) {
      const dataDirectory = join(folder, name)
      mkdirSync(dataDirectory)
      ownedByPostgres(dataDirectory)
      chmodSync(dataDirectory, 0o700)
      runAsPostgres('pg_basebackup', [
        '-d', `host=127.0.0.1 port=${primary.port} user=postgres application_name=${name}`, '-D', dataDirectory, '-R', '-X', 'stream', '--no-sync'
      ])
      const standby = server(name, port, { hot_standby: 'on', ...settings })
      await standby.start()
      return standby
    },
    async removeAll () {
      // Immediate shutdown: the postmaster ends its backends too, which a SIGKILL to it would orphan.
      await Promise.all(servers.map((each) => each.stopImmediately()))
      rmSync(folder, { recursive: true, force: true })
    }
  }
}
