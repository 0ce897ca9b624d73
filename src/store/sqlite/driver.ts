import { createRequire } from 'node:module'
import type BetterSqlite3 from 'better-sqlite3'

/**
 * The better-sqlite3 release for the running Node.js. Release 12 subclasses `node::ObjectWrap`, and
 * built against Node 24.19 or later headers it aborts the process whenever garbage collection finalizes
 * one of its statements while no JavaScript context is entered (nodejs/node#65446). Release 13 is built
 * on Node-API and is free of that, but it declares Node 22 and crashes on Node 20. So Node 22 and later
 * load 13 (the `better-sqlite3-v13` alias), and Node 20 loads 12. Both have the same API.
 */
export const SQLITE_DRIVER = Number(process.versions.node.split('.')[0]) >= 22 ? 'better-sqlite3-v13' : 'better-sqlite3'

const require = createRequire(import.meta.url)

/** The driver's entry file, for another process to load the same release (the lock holder of the fault tests). */
export const sqliteDriverPath = require.resolve(SQLITE_DRIVER)

const Database = require(SQLITE_DRIVER) as typeof BetterSqlite3
export default Database
export const SqliteError = Database.SqliteError
export type SqliteDatabase = BetterSqlite3.Database
export type Statement<P extends unknown[] = unknown[], R = unknown> = BetterSqlite3.Statement<P, R>
