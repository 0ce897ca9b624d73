import { createHmac, randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { describe, expect, it } from 'vitest'
import { newSigningSecret, SecretBox, SecretUnreadableError, signingKeyOf } from '../../src/webhooks/secrets.js'
import { signatureHeader, SigningKeys, type SignedDelivery } from '../../src/webhooks/signature.js'

const AT = Date.UTC(2026, 10, 26, 10, 0, 0, 500)
const ID = '5b7e0c1e-8f0a-4a4b-9d51-2c8e3f1a7b60'

/** The signature the specification defines, computed here independently of the service's code. */
function expected (secret: string, eventId: string, at: number, body: string): string {
  return 'v1,' + createHmac('sha256', signingKeyOf(secret)).update(`${eventId}.${Math.floor(at / 1000)}.${body}`).digest('base64')
}

/** A SecretBox that counts the secrets it opens. */
class CountingSecretBox extends SecretBox {
  opens = 0

  override open (stored: string, subscriptionId: string): string {
    this.opens++
    return super.open(stored, subscriptionId)
  }
}

describe('the webhook-signature header of an attempt', () => {
  const secretsKey = randomBytes(32)
  const box = new SecretBox(secretsKey)
  const keys = new SigningKeys(box)
  const current = newSigningSecret()
  const previous = newSigningSecret()
  const delivery: SignedDelivery = { subscriptionId: ID, eventId: 'msg_1', body: '{"id":1,"name":"Fern"}', storedSecret: box.seal(current, ID) }

  it('is one signature under the secret when no rotation is in its grace period', () => {
    expect(signatureHeader(delivery, AT, keys)).toBe(expected(current, 'msg_1', AT, delivery.body))
  })

  it('carries the previous secret\'s signature after the new one, space-separated, until the grace period ends, and not from then on', () => {
    const rotated = { ...delivery, storedPreviousSecret: box.seal(previous, ID), previousSecretUntil: AT + 1 }

    expect(signatureHeader(rotated, AT, keys)).toBe(`${expected(current, 'msg_1', AT, delivery.body)} ${expected(previous, 'msg_1', AT, delivery.body)}`)
    expect(signatureHeader(rotated, AT + 1, keys)).toBe(expected(current, 'msg_1', AT + 1, delivery.body))
  })

  it('verifies with the standardwebhooks library under either secret', () => {
    const at = Date.now()
    const rotated = { ...delivery, storedPreviousSecret: box.seal(previous, ID), previousSecretUntil: at + 60_000 }
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(at / 1000)), 'webhook-signature': signatureHeader(rotated, at, keys) }

    expect(new Webhook(current).verify(delivery.body, headers)).toEqual({ id: 1, name: 'Fern' })
    expect(new Webhook(previous).verify(delivery.body, headers)).toEqual({ id: 1, name: 'Fern' })
    expect(() => new Webhook(newSigningSecret()).verify(delivery.body, headers)).toThrow('No matching signature found')
  })

  it('opens each stored secret once, and still refuses a sealed secret that another subscription\'s row holds', () => {
    const countingBox = new CountingSecretBox(secretsKey)
    const countingKeys = new SigningKeys(countingBox)
    const signedTwice = [signatureHeader(delivery, AT, countingKeys), signatureHeader(delivery, AT, countingKeys)]
    const opensOfTwo = countingBox.opens
    const copied = { ...delivery, subscriptionId: '0c0a5d3e-1b2c-4d5e-8f90-a1b2c3d4e5f6' }

    expect(signedTwice).toEqual([expected(current, 'msg_1', AT, delivery.body), expected(current, 'msg_1', AT, delivery.body)])
    expect(opensOfTwo).toBe(1)
    expect(() => signatureHeader(copied, AT, countingKeys)).toThrow(SecretUnreadableError)
    expect(signatureHeader(delivery, AT, countingKeys)).toBe(expected(current, 'msg_1', AT, delivery.body))
  })
})
