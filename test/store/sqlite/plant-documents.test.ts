import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { changeJsonOfFields } from '../../../src/store/change-document.js'
import { plantJson } from '../../../src/store/plant-document.js'
import Database from '../../../src/store/sqlite/driver.js'
import type { PlantRecord } from '../../../src/store/plant-store.js'
import { openSqliteStore } from '../../../src/store/sqlite/store.js'
import { temporaryFolder } from '../../helpers/app.js'

/** Every character JSON escapes, and some it leaves as they are. */
const CONTROL_CHARACTERS = Array.from({ length: 0x20 }, (_, code) => String.fromCharCode(code)).join('').slice(1)
const TRICKY_TEXTS = [CONTROL_CHARACTERS, '"quoted" and \\back\\slashed', '\u007f\u0080\u00ff\u2028\u2029\ufeff', '🌵 cactus', '', ',{"id":1}']

describe('the plant documents SQLite builds for reads', () => {
  it('given names and tags with characters JSON escapes, reads each plant as plantJson writes it, by id and by page', async () => {
    const store = openSqliteStore(join(temporaryFolder(), 'documents.db'))
    onTestFinished(() => store.close())
    const plants: PlantRecord[] = [
      { id: -9223372036854775808n, name: 'lowest' },
      { id: 9223372036854775807n, name: 'highest', tag: 'edge' },
      ...TRICKY_TEXTS.flatMap((text, index) => [
        { id: BigInt(10 + index), name: text === '' ? 'x' : text, tag: text },
        { id: BigInt(-10 - index), name: `n ${text}` }
      ])
    ]
    for (const plant of plants) await store.create(plant)
    for (const plant of plants) expect(await store.get(plant.id)).toBe(plantJson(plant.id, plant.name, plant.tag))

    const byId = [...plants].sort((a, b) => a.id < b.id ? -1 : 1)
    const firstPage = await store.list({ limit: 5 })
    expect(firstPage.json).toBe(`[${byId.slice(0, 5).map((plant) => plantJson(plant.id, plant.name, plant.tag)).join(',')}]`)
    expect(firstPage.nextAfter).toBe(byId[4]?.id)
    const rest = await store.list({ limit: 100, after: byId[4]?.id as bigint, lines: true })
    expect(rest).toEqual({ json: byId.slice(5).map((plant) => `${plantJson(plant.id, plant.name, plant.tag)}\n`).join('') })

    for (const text of TRICKY_TEXTS) {
      const tagged = byId.filter((plant) => plant.tag === text)
      const page = await store.list({ limit: 1, tag: text })
      expect(page.json).toBe(`[${plantJson(tagged[0]?.id as bigint, tagged[0]?.name as string, text)}]`)
      expect(page.nextAfter).toBe(tagged.length > 1 ? tagged[0]?.id : undefined)
    }
  })
})

describe('the change documents SQLite keeps in each change row (plant_changes.document)', () => {
  it('given any commit time, type, id and text JSON escapes, holds the bytes changeJson writes', async () => {
    const file = join(temporaryFolder(), 'change-documents.db')
    openSqliteStore(file).close()
    const db = new Database(file)
    onTestFinished(() => { db.close() })
    db.defaultSafeIntegers(true)
    const times = [0, 5, 50, 999, 951782400000, 1764300000123, 253402300799999]
    const insert = db.prepare('INSERT INTO plant_changes (seq, plant_id, type, name, tag, left_tag, committed_at, made_by) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)')
    const expected: string[] = []
    let seq = 0n
    for (const at of times) {
      for (const [code, type] of [[1, 'plant.created'], [2, 'plant.updated'], [3, 'plant.deleted']] as const) {
        for (const text of TRICKY_TEXTS) {
          const id = seq % 2n === 0n ? -9223372036854775808n + seq : 9223372036854775807n - seq
          const name = type === 'plant.deleted' ? null : `n ${text}`
          const tag = name === null || text === '' ? null : text
          seq++
          insert.run(seq, id, code, name, tag, BigInt(at), 'test')
          expected.push(changeJsonOfFields(seq, type, id, name, tag, at))
        }
      }
    }
    expect(db.prepare('SELECT document FROM plant_changes ORDER BY seq').pluck().all()).toEqual(expected)
  })
})
