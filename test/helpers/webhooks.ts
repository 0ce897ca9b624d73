import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { expect } from 'vitest'
import { DEFAULT_WEBHOOK_CONFIG } from '../../src/config.js'
import { bearer, TEST_TOKEN } from './app.js'
import type { WebhookReceiver } from './webhook-receiver.js'

export const ADMIN_TOKEN = 'plantstore-test-admin-token-7c1d9e'
/** TEST_TOKEN for the plants, ADMIN_TOKEN for /admin. */
export const WEBHOOK_TEST_TOKENS = [`name=plants;scopes=plants:read+plants:write;${TEST_TOKEN}`, `name=admin;scopes=admin;${ADMIN_TOKEN}`]

/** Receivers on 127.0.0.1 allowed, retries after 200 ms doubling to 1 s, an idle poll every 50 ms. */
export const WEBHOOK_TEST_CONFIG = { ...DEFAULT_WEBHOOK_CONFIG, allowPrivateNetworks: true, firstRetryMs: 200, maxRetryMs: 1000, pollMs: 50 }

/** Subscribes the receiver (to `events`, or all) and has it verify with the new secret; returns the subscription id. */
export async function subscribe (app: FastifyInstance, receiver: WebhookReceiver, events?: string[]): Promise<string> {
  const response = await app.inject({
    method: 'POST',
    url: '/admin/webhooks',
    headers: bearer(ADMIN_TOKEN),
    payload: { url: receiver.url, ...(events === undefined ? {} : { events }) }
  })
  expect(response.statusCode, response.body).toBe(201)
  const { id, secret } = response.json<{ id: string, secret: string }>()
  receiver.useSecret(secret)
  return id
}

/** `GET /admin/webhooks/{id}`. */
export interface SubscriptionStatus {
  id: string
  url: string
  events: string[]
  createdAt: string
  disabledAt?: string
  disabledReason?: string
  pending: number
  delivered: number
  failed: number
  lastError?: { at: string, message: string }
}

/** One item of `GET /admin/webhooks/{id}/deliveries`. */
export interface DeliveryAttempt {
  id: string
  eventId: string
  type: string
  attempt: number
  statusCode?: number
  error?: string
  at: string
}

export async function subscriptionStatus (app: FastifyInstance, id: string): Promise<SubscriptionStatus> {
  const response = await app.inject({ method: 'GET', url: `/admin/webhooks/${id}`, headers: bearer(ADMIN_TOKEN) })
  expect(response.statusCode, response.body).toBe(200)
  return response.json()
}

/** Every attempt of the subscription, newest first (one page: no `Link`). */
export async function deliveryAttempts (app: FastifyInstance, id: string): Promise<DeliveryAttempt[]> {
  const response = await app.inject({ method: 'GET', url: `/admin/webhooks/${id}/deliveries?limit=1000`, headers: bearer(ADMIN_TOKEN) })
  expect(response.statusCode, response.body).toBe(200)
  expect(response.headers.link).toBeUndefined()
  return response.json()
}

/** Reads until `done` holds for what was read, and returns that; fails after `timeoutMs`. */
export async function waitFor<T> (read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms; last read: ${JSON.stringify(value)}`)
    await sleep(25)
  }
}
