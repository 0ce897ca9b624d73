import { readdirSync } from 'node:fs'
import { openSqliteDatabase } from '../../src/store/sqlite/connection.js'
import Database from '../../src/store/sqlite/driver.js'

/**
 * SQLite files for the backup and restore tests, made with SQL directly (fast, whatever the size), and
 * what the tests read back from a folder or a service.
 */

/** A store of this release holding the plants 1 to `count` (every third one tagged), left as a stopped service leaves it. */
export function makeStore (path: string, count: number): void {
  const db = openSqliteDatabase(path)
  const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
  db.transaction(() => {
    for (let id = 1; id <= count; id++) insert.run(BigInt(id), `plant ${id}`, id % 3 === 0 ? 'shade' : null)
  })()
  db.close()
}

/** A store whose schema version is `version`, as a later release would leave it, in one file. */
export function makeStoreOfVersion (path: string, version: number): void {
  makeStore(path, 1)
  const db = new Database(path)
  db.pragma(`user_version = ${version}`)
  db.pragma('journal_mode = DELETE')
  db.close()
}

/** A SQLite database of another program: no plants table. */
export function makeForeignDatabase (path: string): void {
  const db = new Database(path)
  db.exec("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('not a plant')")
  db.close()
}

/** The names in `folder`, sorted. */
export function filesIn (folder: string): string[] {
  return readdirSync(folder).sort()
}

/** Every plant a service holds, read page by page, by id. */
export async function allPlants (baseUrl: string, token: string): Promise<Map<string, { id: number, name: string, tag?: string }>> {
  const plants = new Map<string, { id: number, name: string, tag?: string }>()
  let path: string | undefined = '/plants?limit=1000'
  while (path !== undefined) {
    const response: Response = await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` } })
    if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}: ${await response.text()}`)
    for (const plant of await response.json() as Array<{ id: number, name: string, tag?: string }>) plants.set(String(plant.id), plant)
    path = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
  }
  return plants
}
