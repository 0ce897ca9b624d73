import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'

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

/**
 * Keeps signing secrets at rest. The dispatcher must read them back to sign, so they cannot be digests
 * like access tokens: with WEBHOOK_SECRETS_KEY they are sealed with AES-256-GCM, the subscription's id
 * bound in as additional data (a sealed secret copied to another row does not open); without a key they
 * are stored as they are, and a copy of the database can sign as this service.
 */
export class SecretBox {
  constructor (private readonly key: Buffer | undefined) {}

  seal (secret: string, subscriptionId: string): string {
    if (this.key === undefined) return secret
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    cipher.setAAD(Buffer.from(subscriptionId))
    const sealed = Buffer.concat([iv, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return SEALED_PREFIX + sealed.toString('base64')
  }

  /** The secret of a stored one; throws SecretUnreadableError when this key cannot open it. */
  open (stored: string, subscriptionId: string): string {
    if (!stored.startsWith(SEALED_PREFIX)) return stored
    if (this.key === undefined) throw new SecretUnreadableError('the secret is sealed and WEBHOOK_SECRETS_KEY is not set')
    const sealed = Buffer.from(stored.slice(SEALED_PREFIX.length), 'base64')
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.subarray(0, IV_BYTES))
      decipher.setAAD(Buffer.from(subscriptionId))
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
      return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8')
    } catch {
      throw new SecretUnreadableError('WEBHOOK_SECRETS_KEY does not open the secret (a different key sealed it)')
    }
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

/**
 * Checks at start that every stored secret opens with the configured key (or lack of one), so a
 * missing or wrong WEBHOOK_SECRETS_KEY stops the start instead of failing every delivery. Returns how
 * many secrets are stored unsealed, for a warning when a key is set.
 */
export function storedSecretsProblem (secrets: ReadonlyArray<{ readonly id: string, readonly storedSecret: string }>, box: SecretBox):
{ readonly problem?: string, readonly unsealed: number } {
  let unsealed = 0
  for (const { id, storedSecret } of secrets) {
    if (!storedSecret.startsWith(SEALED_PREFIX)) {
      unsealed++
      continue
    }
    try {
      box.open(storedSecret, id)
    } catch (error) {
      return { problem: `WEBHOOK_SECRETS_KEY: the signing secret of webhook subscription ${id} cannot be read: ${(error as Error).message}`, unsealed }
    }
  }
  return { unsealed }
}
