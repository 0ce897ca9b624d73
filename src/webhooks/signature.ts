import { createHmac, createSecretKey, type KeyObject } from 'node:crypto'
import type { ClaimedDelivery } from '../store/webhook-store.js'
import { signingKeyOf, type SecretBox } from './secrets.js'

/** What a signature covers, and the secrets to sign it with. */
export type SignedDelivery = Pick<ClaimedDelivery, 'subscriptionId' | 'eventId' | 'body' | 'storedSecret' | 'storedPreviousSecret' | 'previousSecretUntil'>

/** Opened keys kept at most; past that the cache starts again (subscriptions deleted leave theirs behind). */
const MOST_KEYS = 10_000

/**
 * The HMAC keys of stored secrets, opened once each rather than at every attempt (opening a sealed
 * secret is an AES-GCM decryption). A key is found by its stored secret and its subscription, so a
 * sealed secret that another subscription's row holds is opened (and refused) for that one on its own.
 */
export class SigningKeys {
  private readonly opened = new Map<string, { readonly subscriptionId: string, readonly key: KeyObject }>()

  constructor (private readonly secrets: SecretBox) {}

  keyOf (stored: string, subscriptionId: string): KeyObject {
    const known = this.opened.get(stored)
    if (known !== undefined && known.subscriptionId === subscriptionId) return known.key
    const key = createSecretKey(signingKeyOf(this.secrets.open(stored, subscriptionId)))
    if (this.opened.size >= MOST_KEYS) this.opened.clear()
    this.opened.set(stored, { subscriptionId, key })
    return key
  }
}

/** The `webhook-timestamp` of an attempt made at `at` (epoch ms): Unix seconds. */
export function webhookTimestamp (at: number): number {
  return Math.floor(at / 1000)
}

/**
 * The `webhook-signature` header of an attempt made at `at`, per the Standard Webhooks specification:
 * `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` under the subscription's secret and, while a
 * rotation's grace period lasts, a second one under the secret it replaced, space-separated, so that a
 * receiver verifying with either secret accepts the delivery.
 */
export function signatureHeader (delivery: SignedDelivery, at: number, keys: SigningKeys): string {
  const signed = `${delivery.eventId}.${webhookTimestamp(at)}.${delivery.body}`
  const current = `v1,${createHmac('sha256', keys.keyOf(delivery.storedSecret, delivery.subscriptionId)).update(signed).digest('base64')}`
  if (delivery.storedPreviousSecret === undefined || (delivery.previousSecretUntil ?? 0) <= at) return current
  const previous = createHmac('sha256', keys.keyOf(delivery.storedPreviousSecret, delivery.subscriptionId)).update(signed).digest('base64')
  return `${current} v1,${previous}`
}
