import { plantJson } from '../store/plant-document.js'
import type { CopyTarget, TableTally, TargetBatch } from '../store/store-copy.js'
import { columnIndex, keyText, sameRow, type Cell, type StoreRow, type StoreTable, type TableName } from '../store/store-rows.js'

/** What one batch did: its tally, and a line for each row kept as the target has it. */
export interface CopiedBatch {
  readonly tally: TableTally
  readonly conflicts: readonly string[]
}

/**
 * Outbox rows arrive unleased: the source's dispatchers do not reach the target, so the target's
 * dispatcher may claim them at once. An event whose delivery was under way at the source when it was
 * read may therefore be delivered twice, which at-least-once delivery allows (its webhook-id is the same).
 */
const RESET_ON_COPY: Partial<Record<TableName, Readonly<Record<string, Cell>>>> = {
  webhook_outbox: { lease_until: 0n, lease_owner: null }
}

/**
 * Writes one page of source rows into the target, inside the batch's transaction. A row the target lacks
 * is added; one it holds as it is, skipped; one it holds otherwise is kept as the target has it and
 * reported. Rows of a table with a natural key (webhook events, delivery attempts) whose id the target
 * gave to another row are added under a new id, unless the target holds the same row already. A live
 * token is not added next to a live token of the same name with another id (names are unique among
 * live tokens): that too is reported.
 */
export async function copyRows (batch: TargetBatch, target: Pick<CopyTarget, 'asStored'>, table: StoreTable, page: readonly StoreRow[],
  nowMicros: bigint): Promise<CopiedBatch> {
  const conflicts: string[] = []
  let rows = page.map((row) => asCopied(table, row))
  if (table.name === 'access_tokens') rows = await withoutLiveNameClashes(batch, table, rows, nowMicros, conflicts)
  const inserted = table.name === 'plant_changes' ? await insertChanges(batch, table, rows) : await batch.insert(table, rows)
  if (inserted === rows.length) return { tally: { added: inserted, skipped: 0, conflicts: conflicts.length }, conflicts }

  // An inserted row is stored exactly as it is, so the rows stored otherwise, or not at all, are among those not inserted.
  const stored = new Map((await batch.stored(table, rows.map((row) => row[0] ?? null))).map((row) => [keyText(row[0] ?? null), row]))
  let skipped = rows.length - inserted
  const renumbered: StoreRow[] = []
  for (const row of rows) {
    const held = stored.get(keyText(row[0] ?? null))
    const asStored = target.asStored(table, row)
    if (held !== undefined && sameRow(held, asStored)) continue
    skipped--
    if (table.naturalKey !== undefined) {
      const alike = await batch.storedAlike(table, row)
      if (alike === undefined) renumbered.push(row)
      else if (sameRow(alike.slice(1), asStored.slice(1))) skipped++
      else conflicts.push(`${described(table, row)}: the target holds another version of it; kept the target's`)
    } else if (held === undefined) {
      conflicts.push(table.name === 'plant_changes'
        ? `${described(table, row)}: the target's change log has numbered its own changes past it; not copied`
        : `${described(table, row)}: the target holds it under another id; not copied`)
    } else {
      conflicts.push(differing(table, row, held))
    }
  }
  if (renumbered.length > 0) await batch.insertWithNewIds(table, renumbered)
  return { tally: { added: inserted + renumbered.length, skipped, conflicts: conflicts.length }, conflicts }
}

/**
 * Changes are added only above the target's head, which then moves to the last of them: a reader of the
 * target never sees a change appear below one it has read. Into a target that never numbered a change
 * (any copy but a merge), that is every change, each with its `seq`, so the target goes on from them.
 */
async function insertChanges (batch: TargetBatch, table: StoreTable, rows: readonly StoreRow[]): Promise<number> {
  const head = await batch.changeLogHead()
  const above = rows.filter((row) => (row[0] as bigint) > head)
  const last = above.at(-1)?.[0]
  if (last === undefined) return 0
  const inserted = await batch.insert(table, above)
  await batch.continueChangeLog({ head: last as bigint, prunedThrough: 0n })
  return inserted
}

function asCopied (table: StoreTable, row: StoreRow): StoreRow {
  const reset = RESET_ON_COPY[table.name]
  if (reset === undefined) return row
  return table.columns.map((column, index) => column.name in reset ? reset[column.name] ?? null : row[index] ?? null)
}

async function withoutLiveNameClashes (batch: TargetBatch, table: StoreTable, rows: readonly StoreRow[], nowMicros: bigint,
  conflicts: string[]): Promise<StoreRow[]> {
  const live = await batch.liveTokens(nowMicros)
  const [name, expiresAt, revokedAt] = ['name', 'expires_at', 'revoked_at'].map((column) => columnIndex(table, column))
  return rows.filter((row) => {
    const expiry = row[expiresAt as number] as bigint | null
    const isLive = row[revokedAt as number] === null && (expiry === null || expiry > nowMicros)
    const holder = live.get(row[name as number] as string)
    if (!isLive || holder === undefined || holder === row[0]) return true
    conflicts.push(`${described(table, row)}: the target has a live token of that name (id ${holder}), and two live tokens may not share a name; not copied`)
    return false
  })
}

function differing (table: StoreTable, row: StoreRow, held: StoreRow): string {
  if (table.name !== 'plants') return `${described(table, row)}: the target holds another version of it; kept the target's`
  const document = (plant: StoreRow) => plantJson(plant[0] as bigint, plant[1] as string, plant[2] as string | null)
  return `plant ${row[0]}: the target holds ${document(held)}, the source ${document(row)}; kept the target's`
}

/** A row as messages name it: never with a secret, a digest or a webhook URL (which may hold credentials). */
function described (table: StoreTable, row: StoreRow): string {
  const cell = (name: string) => String(row[columnIndex(table, name)])
  switch (table.name) {
    case 'plants': return `plant ${cell('id')}`
    case 'access_tokens': return `access token ${cell('id')} (${JSON.stringify(cell('name'))})`
    case 'webhook_subscriptions': return `webhook subscription ${cell('id')}`
    case 'webhook_outbox': return `webhook event ${cell('event_id')} of subscription ${cell('subscription_id')}`
    case 'webhook_attempts': return `delivery attempt ${cell('attempt')} of webhook event ${cell('event_id')} (subscription ${cell('subscription_id')})`
    case 'plant_changes': return `change ${cell('seq')} (of plant ${cell('plant_id')})`
  }
}
