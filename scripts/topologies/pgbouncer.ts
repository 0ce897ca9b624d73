import { spawn, execFileSync } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Debian's PgBouncer (scripts/topologies/install-tools.sh installs it). */
export const PGBOUNCER = '/usr/sbin/pgbouncer'

export interface PgBouncer {
  /** The database's URL through the pooler (same user, password and database name). */
  readonly url: string
  readonly pid: number
  /** Everything PgBouncer logged (it logs to stderr when not daemonized). */
  readonly log: () => string
  /** Stops it by its PID (SIGINT: at once) and removes its folder. */
  readonly stop: () => Promise<void>
}

/**
 * Starts PgBouncer 1.18 on 127.0.0.1:`port` in front of the database `databaseUrl` names, in `poolMode`,
 * with its own defaults otherwise (no `ignore_startup_parameters`, no `max_prepared_statements`).
 * Clients log in without a password (`auth_type = trust`); PgBouncer logs in to PostgreSQL with the
 * URL's. It refuses to run as root, so as root it runs as the user `postgres`, its folder readable by all.
 */
export async function startPgBouncer (databaseUrl: string, port: number, poolMode: 'session' | 'transaction'): Promise<PgBouncer> {
  const server = new URL(databaseUrl)
  const user = decodeURIComponent(server.username)
  const database = server.pathname.slice(1)
  const folder = mkdtempSync(join(tmpdir(), 'plantstore-pgbouncer-'))
  chmodSync(folder, 0o755)
  const authFile = join(folder, 'userlist.txt')
  writeFileSync(authFile, `"${user}" ""\n`, { mode: 0o644 })
  const configFile = join(folder, 'pgbouncer.ini')
  writeFileSync(configFile, [
    '[databases]',
    `${database} = host=${server.hostname} port=${server.port} dbname=${database} user=${user} password=${decodeURIComponent(server.password)}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${authFile}`,
    `pool_mode = ${poolMode}`,
    'default_pool_size = 20',
    'max_client_conn = 500',
    ''
  ].join('\n'), { mode: 0o644 })

  const asPostgres = process.getuid?.() === 0
    ? { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) }
    : {}
  const child = spawn(PGBOUNCER, [configFile], { stdio: ['ignore', 'pipe', 'pipe'], ...asPostgres })
  let log = ''
  child.stdout.on('data', (chunk: Buffer) => { log += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { log += chunk.toString() })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid as number, 'SIGINT')
      await exited
    }
    rmSync(folder, { recursive: true, force: true })
  }
  try {
    await untilListening(port, () => child.exitCode !== null)
  } catch (error) {
    await stop()
    throw new Error(`${String(error)}\n${log}`)
  }
  const url = new URL(databaseUrl)
  url.hostname = '127.0.0.1'
  url.port = String(port)
  return { url: url.toString(), pid: child.pid as number, log: () => log, stop }
}

async function untilListening (port: number, exited: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if (exited()) throw new Error(`pgbouncer exited before listening on ${port}`)
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => { socket.destroy(); resolve(true) })
      socket.once('error', () => resolve(false))
    })
    if (open) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`pgbouncer did not listen on ${port} within 10 s`)
}
