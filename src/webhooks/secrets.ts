import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import type { StoredSecrets } from '../store/webhook-store.js'

/** The Standard Webhooks form: `whsec_` and the base64 of the key's bytes. */
const SECRET_PREFIX = 'whsec_'
const SECRET_BYTES = 32
const SEALED_PREFIX = 'sealed:v1:'
const IV_BYTES = 12
const TAG_BYTES = 16

export function newSigningSecret (): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64')
}

/** The HMAC key a secret stands for. */
export function signingKeyOf (secret: string): Buffer {
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
}

export class SecretUnreadableError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'SecretUnreadableError'
  }
}

/** Which key a stored secret is sealed with: the current one, a previous one, or none (stored as it is). */
export type SealedWith = 'key' | 'previous key' | 'none'

/**
 * Keeps signing secrets at rest. The dispatcher must read them back to sign, so they cannot be digests
 * like access tokens: with WEBHOOK_SECRETS_KEY they are sealed with AES-256-GCM, the subscription's id
 * bound in as additional data (a sealed secret copied to another row does not open); without a key they
 * are stored as they are, and a copy of the database can sign as this service. New secrets are always
 * sealed with the key; the previous keys (WEBHOOK_SECRETS_PREVIOUS_KEYS) only open secrets sealed before
 * the key was rotated, until `plantstore webhooks reseal` seals them again with the key.
 */
export class SecretBox {
  constructor (private readonly key: Buffer | undefined, private readonly previousKeys: readonly Buffer[] = []) {
    if (key === undefined && previousKeys.length > 0) throw new Error('previous secrets keys need a current one')
  }

  /** Whether a key is set: then every secret is stored sealed. */
  get sealing (): boolean {
    return this.key !== undefined
  }

  seal (secret: string, subscriptionId: string): string {
    if (this.key === undefined) return secret
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    cipher.setAAD(Buffer.from(subscriptionId))
    const sealed = Buffer.concat([iv, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return SEALED_PREFIX + sealed.toString('base64')
  }

  /** The secret of a stored one; throws SecretUnreadableError when neither the key nor a previous one opens it. */
  open (stored: string, subscriptionId: string): string {
    return this.opened(stored, subscriptionId).secret
  }

  /** Which key opens a stored secret; throws SecretUnreadableError when none does. */
  sealedWith (stored: string, subscriptionId: string): SealedWith {
    return this.opened(stored, subscriptionId).sealedWith
  }

  private opened (stored: string, subscriptionId: string): { readonly secret: string, readonly sealedWith: SealedWith } {
    if (!stored.startsWith(SEALED_PREFIX)) return { secret: stored, sealedWith: 'none' }
    if (this.key === undefined) throw new SecretUnreadableError('the secret is sealed and WEBHOOK_SECRETS_KEY is not set')
    const sealed = Buffer.from(stored.slice(SEALED_PREFIX.length), 'base64')
    const keys = [this.key, ...this.previousKeys]
    for (const [index, key] of keys.entries()) {
      const secret = openedWith(key, sealed, subscriptionId)
      if (secret !== undefined) return { secret, sealedWith: index === 0 ? 'key' : 'previous key' }
    }
    throw new SecretUnreadableError(this.previousKeys.length === 0
      ? 'WEBHOOK_SECRETS_KEY does not open the secret (a different key sealed it)'
      : 'neither WEBHOOK_SECRETS_KEY nor WEBHOOK_SECRETS_PREVIOUS_KEYS opens the secret (a different key sealed it)')
  }
}

/** The secret `key` sealed, or undefined when another key did (or the bytes were changed). */
function openedWith (key: Buffer, sealed: Buffer, subscriptionId: string): string | undefined {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES))
    decipher.setAAD(Buffer.from(subscriptionId))
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
    return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8')
  } catch {
    return undefined
  }
}

/** WEBHOOK_SECRETS_KEY's text as the 32 bytes of an AES-256 key: 64 hexadecimal digits, or base64. */
export function secretsKeyOf (text: string): Buffer | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex')
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const key = Buffer.from(text.replaceAll('-', '+').replaceAll('_', '/'), 'base64')
    if (key.length === 32) return key
  }
  return undefined
}

/** How the stored secrets stand with the configured keys: the start's check and warnings. */
export interface StoredSecretsState {
  /** Why the start must stop: a secret no configured key opens. */
  readonly problem?: string
  /** Secrets stored as they are (before a key was set). */
  readonly unsealed: number
  /** Secrets a previous key sealed. */
  readonly underPreviousKeys: number
}

/**
 * Checks at start that every stored secret in use opens with the configured keys (or lack of one), so a
 * missing or wrong WEBHOOK_SECRETS_KEY stops the start instead of failing every delivery. A previous
 * secret whose grace period is over is not used any more and not checked. Counts the secrets
 * `plantstore webhooks reseal` would seal again, for a warning.
 */
export function storedSecretsState (secrets: readonly StoredSecrets[], box: SecretBox, now: number): StoredSecretsState {
  let unsealed = 0
  let underPreviousKeys = 0
  for (const { id, storedSecret, storedPreviousSecret, previousSecretUntil = 0 } of secrets) {
    const stored = storedPreviousSecret !== undefined && previousSecretUntil > now ? [storedSecret, storedPreviousSecret] : [storedSecret]
    for (const secret of stored) {
      let sealedWith
      try {
        sealedWith = box.sealedWith(secret, id)
      } catch (error) {
        return { problem: `WEBHOOK_SECRETS_KEY: the signing secret of webhook subscription ${id} cannot be read: ${(error as Error).message}`, unsealed, underPreviousKeys }
      }
      if (sealedWith === 'none') unsealed++
      if (sealedWith === 'previous key') underPreviousKeys++
    }
  }
  return { unsealed, underPreviousKeys }
}
