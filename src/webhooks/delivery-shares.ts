import type { SettledAttempt } from '../store/webhook-store.js'
import type { CircuitBreaker } from './circuit-breaker.js'

/** Why an attempt cut short by a stop is given back: it says nothing about the receiver. */
export const STOPPED_DURING_DELIVERY = 'the service stopped during the delivery'

/**
 * Each subscription's share of this instance's delivery slots: at most `perSubscription` attempts of one
 * subscription under way at once, and never more than `concurrency / (others + 2)`, where `others` counts
 * the other subscriptions with attempts under way, so that however many receivers are slow, slots stay
 * free for one more; none while its circuit is open and one (the probe) when its cool-down has passed.
 * A slow or silent receiver so holds only its own share, and the rest stays free for the others.
 */
export class DeliveryShares {
  private readonly inFlight = new Map<string, number>()

  constructor (readonly perSubscription: number, private readonly concurrency: number, private readonly circuits: CircuitBreaker) {}

  /** The share of a subscription with nothing under way: what a claim may take of it at most. */
  newcomerShare (): number {
    return this.shareBeside(this.inFlight.size)
  }

  private shareBeside (others: number): number {
    return Math.min(this.perSubscription, Math.max(1, Math.floor(this.concurrency / (others + 2))))
  }

  started (subscriptionId: string): void {
    this.inFlight.set(subscriptionId, (this.inFlight.get(subscriptionId) ?? 0) + 1)
  }

  /** Counts the attempt's end, and tells the subscription's circuit how it went. */
  ended ({ delivery: { subscriptionId }, result, error }: SettledAttempt, now: number): void {
    const left = (this.inFlight.get(subscriptionId) ?? 1) - 1
    if (left === 0) this.inFlight.delete(subscriptionId)
    else this.inFlight.set(subscriptionId, left)
    if (result === 'delivered') this.circuits.succeeded(subscriptionId)
    else if (result === 'gone') this.circuits.forget(subscriptionId)
    else if (error !== STOPPED_DURING_DELIVERY) this.circuits.failed(subscriptionId, now)
  }

  /**
   * Whether at least half of the subscription's share is free now: its share (or its circuit's cap)
   * less its attempts under way. With nothing under way it has its whole newcomer's share.
   */
  halfFree (subscriptionId: string, now: number): boolean {
    const count = this.inFlight.get(subscriptionId) ?? 0
    const share = this.circuits.capOf(subscriptionId, now) ?? (count === 0 ? this.newcomerShare() : this.shareBeside(this.inFlight.size - 1))
    return share > 0 && 2 * (share - count) >= share
  }

  /** What a claim may take of the subscriptions below their full share (the claim's `subscriptionLimits`). */
  limits (now: number): Map<string, number> {
    const limits = this.circuits.caps(now)
    for (const [subscriptionId, cap] of limits) limits.set(subscriptionId, Math.max(0, cap - (this.inFlight.get(subscriptionId) ?? 0)))
    const share = this.shareBeside(this.inFlight.size - 1)
    for (const [subscriptionId, count] of this.inFlight) {
      if (!limits.has(subscriptionId)) limits.set(subscriptionId, Math.max(0, share - count))
    }
    return limits
  }
}
