import { GroupCommit } from '../group-commit.js'
import { outcomeOfMeeting, recordOfRow, type PlantRecord } from '../plant-store.js'
import type { WriteOperation, WriteOutcome } from '../write-operations.js'
import { asUnavailable } from './transient-errors.js'
import type { SqliteWriter } from './writer.js'
import { packCreates, type CreateEffects, type ThreadCreate, type WriteEffect } from './writer-protocol.js'
import { UNNAMED_WRITER } from '../change-log.js'

const MAX_BATCH_SIZE = 256

/**
 * Plant writes, group-committed by the writer thread (writer-plants.ts): the writes that arrive while
 * one batch commits share the next transaction and fsync. The thread reports each change's outcome and
 * the row each create met. A batch of creates alone crosses to the thread packed in one text.
 */
export function sqliteGroupCommit (writer: SqliteWriter, onBatchCommitted: ((size: number) => void) | undefined): GroupCommit {
  const commitBatch = async (operations: readonly WriteOperation[]) => {
    const creates = onlyCreates(operations)
    const packed = creates === undefined ? undefined : packCreates(creates)
    if (creates !== undefined && packed !== undefined) {
      return outcomesOfCreates(creates, await unlessFailed(writer.createAll(packed)))
    }
    const effects = await unlessFailed(writer.write(operations))
    return operations.map((operation, index) => outcomeOf(operation, effects[index]))
  }
  return new GroupCommit(commitBatch, { backend: 'sqlite', maxBatchSize: MAX_BATCH_SIZE, onBatchCommitted })
}

/** The writer's answer; its failure as the store's `StoreUnavailableError` where it is one. */
async function unlessFailed<Result> (answer: Promise<Result>): Promise<Result> {
  try {
    return await answer
  } catch (error) {
    throw asUnavailable(error)
  }
}

/** The creates of a batch of creates only; undefined when the batch holds another write. */
function onlyCreates (operations: readonly WriteOperation[]): ThreadCreate[] | undefined {
  const creates: ThreadCreate[] = []
  for (const operation of operations) {
    if (operation.kind !== 'create') return undefined
    creates.push({ plant: operation.plant, by: operation.by ?? UNNAMED_WRITER })
  }
  return creates
}

function outcomesOfCreates (creates: readonly ThreadCreate[], effects: CreateEffects): WriteOutcome[] {
  if (effects.inserted.length !== creates.length) throw new Error('the SQLite writer answered out of step')
  let met = 0
  return creates.map(({ plant }, index) => effects.inserted[index] === '1'
    ? { status: 'created', plant }
    : outcomeOfCreate(plant, { inserted: false, existing: effects.met[met++] }))
}

/** Operations run in arrival order in the writer's transaction, so repeated ids in a batch just work. */
function outcomeOf (operation: WriteOperation, effect: WriteEffect | undefined): WriteOutcome {
  if (operation.kind === 'plan') {
    if (effect === undefined || !('planned' in effect)) throw new Error('the SQLite writer answered out of step')
    return effect.planned
  }
  if (operation.kind !== 'create') {
    if (effect === undefined || !('outcome' in effect)) throw new Error('the SQLite writer answered out of step')
    return effect.outcome
  }
  return outcomeOfCreate(operation.plant, effect)
}

function outcomeOfCreate (plant: PlantRecord, effect: WriteEffect | undefined): WriteOutcome {
  if (effect === undefined || !('inserted' in effect)) throw new Error('the SQLite writer answered out of step')
  if (effect.inserted) return { status: 'created', plant }
  if (effect.existing === undefined) throw new Error(`plant ${plant.id} met a row that is not there`)
  return outcomeOfMeeting(recordOfRow(effect.existing), plant)
}
