import { GroupCommit } from '../group-commit.js'
import { outcomeOfMeeting, recordOfRow } from '../plant-store.js'
import type { WriteOperation, WriteOutcome } from '../write-operations.js'
import { asUnavailable } from './transient-errors.js'
import type { SqliteWriter } from './writer.js'
import type { WriteEffect } from './writer-protocol.js'

const MAX_BATCH_SIZE = 256

/**
 * Plant writes, group-committed by the writer thread (writer-plants.ts): the writes that arrive while
 * one batch commits share the next transaction and fsync. The thread reports each change's outcome and
 * the row each create met.
 */
export function sqliteGroupCommit (writer: SqliteWriter, onBatchCommitted: ((size: number) => void) | undefined): GroupCommit {
  const commitBatch = async (operations: readonly WriteOperation[]) => {
    let effects
    try {
      effects = await writer.write(operations)
    } catch (error) {
      throw asUnavailable(error)
    }
    return operations.map((operation, index) => outcomeOf(operation, effects[index]))
  }
  return new GroupCommit(commitBatch, { backend: 'sqlite', maxBatchSize: MAX_BATCH_SIZE, onBatchCommitted })
}

/** Operations run in arrival order in the writer's transaction, so repeated ids in a batch just work. */
function outcomeOf (operation: WriteOperation, effect: WriteEffect | undefined): WriteOutcome {
  if (operation.kind !== 'create') {
    if (effect === undefined || !('outcome' in effect)) throw new Error('the SQLite writer answered out of step')
    return effect.outcome
  }
  const { plant } = operation
  if (effect === undefined || !('inserted' in effect)) throw new Error('the SQLite writer answered out of step')
  if (effect.inserted) return { status: 'created', plant }
  if (effect.existing === undefined) throw new Error(`plant ${plant.id} met a row that is not there`)
  return outcomeOfMeeting(recordOfRow(effect.existing), plant)
}
