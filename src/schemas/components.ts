import type { TSchema } from '@sinclair/typebox'
import { BatchDelete, BatchPatch, BatchPost, BatchPut, BatchRequest, BatchResult, BatchResults } from './batch.js'
import { ErrorBody } from './error-body.js'
import { Change, ChangeHead, PlantHistoryChange } from './changes.js'
import { Health } from './health.js'
import { NewPlant, Plant, PlantPatch, PlantReplacement, StoredPlant } from './plants.js'
import { AccessToken, CreatedAccessToken, NewAccessToken } from './tokens.js'
import {
  CreatedWebhookSubscription, DeliveryAttempt, NewWebhookSubscription, RotatedWebhookSecret, WebhookSecretRotation, WebhookSubscription,
  WebhookSubscriptionStatus
} from './webhooks.js'

/** Every schema with an `$id`: registered once on the app, emitted as OpenAPI components. */
export const sharedSchemas: readonly TSchema[] = [
  Plant, NewPlant, StoredPlant, PlantReplacement, PlantPatch, NewAccessToken, CreatedAccessToken, AccessToken,
  NewWebhookSubscription, WebhookSubscription, CreatedWebhookSubscription, WebhookSubscriptionStatus, WebhookSecretRotation,
  RotatedWebhookSecret, DeliveryAttempt, BatchPost, BatchPut, BatchPatch, BatchDelete, BatchRequest, BatchResult, BatchResults, Change, PlantHistoryChange,
  ChangeHead, ErrorBody, Health
]
