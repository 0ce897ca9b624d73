import { createHmac } from 'node:crypto'
import type { ClaimedDelivery } from '../store/webhook-store.js'
import { signingKeyOf, type SecretBox } from './secrets.js'

/** What a signature covers, and the secrets to sign it with. */
export type SignedDelivery = Pick<ClaimedDelivery, 'subscriptionId' | 'eventId' | 'body' | 'storedSecret' | 'storedPreviousSecret' | 'previousSecretUntil'>

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
export function signatureHeader (delivery: SignedDelivery, at: number, secrets: SecretBox): string {
  const signed = `${delivery.eventId}.${webhookTimestamp(at)}.${delivery.body}`
  const stored = [delivery.storedSecret]
  if (delivery.storedPreviousSecret !== undefined && (delivery.previousSecretUntil ?? 0) > at) stored.push(delivery.storedPreviousSecret)
  return stored
    .map((secret) => `v1,${createHmac('sha256', signingKeyOf(secrets.open(secret, delivery.subscriptionId))).update(signed).digest('base64')}`)
    .join(' ')
}
