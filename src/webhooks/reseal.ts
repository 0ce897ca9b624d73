import type { StoredSecretReplacement, StoredSecrets } from '../store/webhook-store.js'
import { SecretUnreadableError, type SecretBox } from './secrets.js'

/** What `plantstore webhooks reseal` changes: every stored secret not sealed with the current key yet. */
export interface ResealPlan {
  readonly replacements: readonly StoredSecretReplacement[]
  /** Secrets a previous key sealed. */
  readonly underPreviousKeys: number
  /** Secrets stored before WEBHOOK_SECRETS_KEY was set. */
  readonly unsealed: number
  /** Previous secrets whose grace period is over: dropped rather than sealed again. */
  readonly expired: number
  /** Secrets in use, sealed with the current key already. */
  readonly current: number
}

/**
 * The replacements that leave every stored secret sealed with `box`'s key: secrets a previous key sealed
 * and secrets stored unsealed are sealed with it; previous secrets past their grace period are dropped.
 * Throws SecretUnreadableError, naming the subscription, when no configured key opens a secret in use:
 * then nothing may be changed.
 */
export function resealPlan (stored: readonly StoredSecrets[], box: SecretBox, now: number): ResealPlan {
  const replacements: StoredSecretReplacement[] = []
  const tally = { underPreviousKeys: 0, unsealed: 0, expired: 0, current: 0 }
  const reseal = (id: string, column: StoredSecretReplacement['column'], from: string) => {
    let sealedWith
    try {
      sealedWith = box.sealedWith(from, id)
    } catch (error) {
      if (!(error instanceof SecretUnreadableError)) throw error
      throw new SecretUnreadableError(`the signing secret of webhook subscription ${id} cannot be read: ${error.message}`)
    }
    if (sealedWith === 'key') {
      tally.current++
      return
    }
    if (sealedWith === 'previous key') tally.underPreviousKeys++
    else tally.unsealed++
    replacements.push({ id, column, from, to: box.seal(box.open(from, id), id) })
  }
  for (const { id, storedSecret, storedPreviousSecret, previousSecretUntil = 0 } of stored) {
    reseal(id, 'secret', storedSecret)
    if (storedPreviousSecret === undefined) continue
    if (previousSecretUntil > now) {
      reseal(id, 'previousSecret', storedPreviousSecret)
    } else {
      tally.expired++
      replacements.push({ id, column: 'previousSecret', from: storedPreviousSecret, to: null })
    }
  }
  return { replacements, ...tally }
}
