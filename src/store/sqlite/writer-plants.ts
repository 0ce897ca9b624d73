import type { SqliteDatabase } from './driver.js'
import { unpackCreates, unpackPlan, type CreateEffects, type ThreadPlan, type ThreadWriteOperation, type WriteEffect } from './writer-protocol.js'
import { plantJson } from '../plant-document.js'
import { foldName } from '../plant-names.js'
import { recordOfRow, sameState, type PlantRecord, type PlantRow } from '../plant-store.js'
import { decideChange, idOf, type ChangeOperation } from '../write-operations.js'
import { deletedPlantBody, newEventId, subscribesTo, type WebhookEventType } from '../webhook-store.js'
import { UNNAMED_WRITER } from '../change-log.js'
import { changeRecorder } from './writer-changes.js'

interface Subscriber { readonly id: string, readonly events: string }

/** A create's effect: it stored its plant, or met the row that holds its id (undefined: none was there). */
type CreateEffect = Extract<WriteEffect, { readonly inserted: boolean }>

const INSERTED: CreateEffect = { inserted: true }
const WRITTEN_PLAN: WriteEffect = { planned: { status: 'written' } }
const STALE_PLAN: WriteEffect = { planned: { status: 'stale' } }

/** The writer thread's plant writes, each batch in one transaction. */
export interface PlantWrites {
  /** Runs a batch of writes in one transaction: each one's effect, in order. */
  readonly write: (operations: readonly ThreadWriteOperation[]) => WriteEffect[]
  /** Runs a batch of creates (`packCreates`) in one transaction. */
  readonly createAll: (packed: string) => CreateEffects
}

/**
 * The plant writes on `db`. A change applies the rules of `decideChange` to its row here and reports
 * the outcome; a create reports the row it met, and the adapter on the main thread tells a replay from
 * a conflict. A write that changed a row records its change (writer-changes.ts) and its event, one
 * outbox row per enabled subscription that wants it, in the same transaction.
 */
export function plantWrites (db: SqliteDatabase): PlantWrites {
  const insert = db.prepare<[bigint, string, string | null, string]>(
    'INSERT INTO plants (id, name, tag, name_folded) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING')
  const select = db.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?')
  const rename = db.prepare<[string, string, bigint]>('UPDATE plants SET name = ?, name_folded = ? WHERE id = ?')
  const retag = db.prepare<[string | null, bigint]>('UPDATE plants SET tag = ? WHERE id = ?')
  const update = db.prepare<[string, string, string | null, bigint]>('UPDATE plants SET name = ?, name_folded = ?, tag = ? WHERE id = ?')
  const remove = db.prepare<[bigint]>('DELETE FROM plants WHERE id = ?')
  const subscriptions = db.prepare<[], Subscriber>('SELECT id, events FROM webhook_subscriptions WHERE disabled_at IS NULL')
  const insertOutbox = db.prepare<[string, string, WebhookEventType, bigint, string, number, number]>(
    'INSERT INTO webhook_outbox (subscription_id, event_id, event_type, plant_id, body, created_at, next_attempt_at) ' +
    'VALUES (?, ?, ?, ?, ?, ?, ?)')

  const changes = changeRecorder(db)
  // The enabled subscriptions of the batch being written, read once per transaction.
  let subscribers: Subscriber[] = []
  const recordEvent = (type: WebhookEventType, id: bigint, body: string) => {
    let eventId: string | undefined
    const now = Date.now()
    for (const subscriber of subscribers) {
      if (!subscribesTo(subscriber.events, type)) continue
      eventId ??= newEventId()
      insertOutbox.run(subscriber.id, eventId, type, id, body, now, now)
    }
  }

  // Writes only what changed: an update that leaves the tag alone leaves the tag index alone too, and one
  // that leaves the name alone leaves the name indexes, the search index among them.
  const store = (before: PlantRow | undefined, after: PlantRecord, by: string) => {
    const tag = after.tag ?? null
    const renamed = before === undefined || before.name !== after.name
    if (before === undefined) insert.run(after.id, after.name, tag, foldName(after.name))
    else if (before.tag !== tag) {
      if (renamed) update.run(after.name, foldName(after.name), tag, after.id)
      else retag.run(tag, after.id)
    } else if (renamed) rename.run(after.name, foldName(after.name), after.id)
    else return
    changes.record({ id: after.id, tagBefore: before?.tag ?? null, created: before === undefined, after, by })
    if (subscribers.length > 0) recordEvent(before === undefined ? 'plant.created' : 'plant.updated', after.id, plantJson(after.id, after.name, tag))
  }

  const removeRow = (before: PlantRow, by: string) => {
    remove.run(before.id)
    changes.record({ id: before.id, tagBefore: before.tag, created: false, after: undefined, by })
    if (subscribers.length > 0) recordEvent('plant.deleted', before.id, deletedPlantBody(before.id))
  }

  const change = (operation: ChangeOperation): WriteEffect => {
    const id = idOf(operation)
    const before = select.get(id)
    const { outcome, after } = decideChange(operation, before === undefined ? undefined : recordOfRow(before))
    const by = operation.by ?? UNNAMED_WRITER
    if (outcome.status === 'deleted' && before !== undefined) removeRow(before, by)
    else if (outcome.status !== 'stale' && after !== undefined) store(before, after, by)
    return { outcome }
  }

  const create = (plant: PlantRecord, by: string): CreateEffect => {
    const tag = plant.tag ?? null
    if (insert.run(plant.id, plant.name, tag, foldName(plant.name)).changes === 1) {
      changes.record({ id: plant.id, tagBefore: null, created: true, after: plant, by })
      // (Without subscribers there is no event to record, nor a body to build for one.)
      if (subscribers.length > 0) recordEvent('plant.created', plant.id, plantJson(plant.id, plant.name, tag))
      return INSERTED
    }
    return { inserted: false, existing: select.get(plant.id) }
  }

  /**
   * A plan: its expectations checked against the rows, then its changes applied in order, each with its
   * events. Once checked, each row is what the plan says it is at every step, so none is read again.
   */
  const writePlan = (plan: ThreadPlan, by: string): WriteEffect => {
    const rows = new Map<bigint, PlantRow | undefined>()
    for (const [id, expected] of plan.expected) {
      const row = select.get(id)
      if (!sameState(row === undefined ? undefined : recordOfRow(row), expected)) return STALE_PLAN
      rows.set(id, row)
    }
    for (const { id, after } of plan.changes) {
      const before = rows.get(id)
      if (after === undefined) {
        if (before !== undefined) removeRow(before, by)
        rows.set(id, undefined)
      } else {
        store(before, after, by)
        rows.set(id, { id, name: after.name, tag: after.tag ?? null })
      }
    }
    return WRITTEN_PLAN
  }

  const write = db.transaction((operations: readonly ThreadWriteOperation[]) => {
    subscribers = subscriptions.all()
    changes.begin()
    const effects = operations.map((operation) => {
      switch (operation.kind) {
        case 'create': return create(operation.plant, operation.by ?? UNNAMED_WRITER)
        case 'plan': return writePlan(operation.plan, operation.by ?? UNNAMED_WRITER)
        case 'packed-plan': return writePlan(unpackPlan(operation.packed), operation.by)
        default: return change(operation)
      }
    })
    changes.finish()
    return effects
  })
  const createAll = db.transaction((creates: ReadonlyArray<{ readonly plant: PlantRecord, readonly by: string }>): CreateEffects => {
    subscribers = subscriptions.all()
    changes.begin()
    let inserted = ''
    const met: Array<PlantRow | undefined> = []
    for (const { plant, by } of creates) {
      const effect = create(plant, by)
      if (effect.inserted) {
        inserted += '1'
      } else {
        inserted += '0'
        met.push(effect.existing)
      }
    }
    changes.finish()
    return { inserted, met }
  })
  return {
    write: (operations) => write.immediate(operations),
    createAll: (packed) => createAll.immediate(unpackCreates(packed))
  }
}
