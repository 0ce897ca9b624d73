import { describe, expect, it } from 'vitest'
import { CircuitBreaker } from '../../src/webhooks/circuit-breaker.js'
import { DeliveryShares } from '../../src/webhooks/delivery-shares.js'
import type { ClaimedDelivery, SettledAttempt } from '../../src/store/webhook-store.js'

function recordingLog () {
  const lines: string[] = []
  return { lines, warn: (details: object, message: string) => { lines.push(`${message} ${JSON.stringify(details)}`) } }
}

const OPTIONS = { threshold: 3, firstCoolDownMs: 1000, maxCoolDownMs: 4000 }

function attemptOf (subscriptionId: string, result: SettledAttempt['result'], error?: string): SettledAttempt {
  const delivery = { subscriptionId } as unknown as ClaimedDelivery
  return { delivery, at: 0, result, ...(error === undefined ? {} : { error }) }
}

describe('a circuit per subscription', () => {
  it('opens after the threshold of failures in a row, lets one probe through after the cool-down, and closes on a success', () => {
    const log = recordingLog()
    const circuits = new CircuitBreaker(OPTIONS, log)
    circuits.failed('a', 0)
    circuits.failed('a', 10)
    expect(circuits.capOf('a', 20)).toBeUndefined()
    circuits.failed('a', 20)

    expect(circuits.capOf('a', 20)).toBe(0)
    expect(circuits.capOf('a', 1019)).toBe(0)
    expect(circuits.capOf('a', 1020)).toBe(1)
    expect(circuits.capOf('b', 1020)).toBeUndefined()
    expect(circuits.open).toBe(1)
    circuits.succeeded('a')

    expect(circuits.capOf('a', 1020)).toBeUndefined()
    expect(circuits.open).toBe(0)
    expect(log.lines).toEqual([
      'webhooks: the receiver keeps failing; its circuit is open: its events wait, then one probe tries it {"subscription":"a","failures":3,"coolDownMs":1000}',
      'webhooks: the receiver answers again; its circuit is closed and its events go out {"subscription":"a"}'
    ])
  })

  it('doubles the cool-down at every failed probe up to its cap, ignores failures of attempts made before it opened, and logs no more lines', () => {
    const log = recordingLog()
    const circuits = new CircuitBreaker(OPTIONS, log)
    for (let failure = 0; failure < 3; failure++) circuits.failed('a', 0)
    circuits.failed('a', 500)
    expect(circuits.capOf('a', 1000)).toBe(1)

    circuits.failed('a', 1000)
    expect([circuits.capOf('a', 2999), circuits.capOf('a', 3000)]).toEqual([0, 1])
    circuits.failed('a', 3000)
    expect([circuits.capOf('a', 6999), circuits.capOf('a', 7000)]).toEqual([0, 1])
    circuits.failed('a', 7000)
    expect([circuits.capOf('a', 10_999), circuits.capOf('a', 11_000)]).toEqual([0, 1])
    expect(log.lines).toHaveLength(1)
  })

  it('counts each subscription\'s attempts under way against its share, with its circuit\'s cap on top', () => {
    const circuits = new CircuitBreaker(OPTIONS, recordingLog())
    const shares = new DeliveryShares(4, 32, circuits)
    for (let attempt = 0; attempt < 3; attempt++) shares.started('slow')
    shares.started('quick')
    expect(shares.limits(0)).toEqual(new Map([['slow', 1], ['quick', 3]]))

    shares.ended(attemptOf('quick', 'delivered'), 0)
    for (let attempt = 0; attempt < 3; attempt++) shares.ended(attemptOf('slow', 'retry', 'no answer within 10 s'), 0)
    expect(shares.limits(0)).toEqual(new Map([['slow', 0]]))
    expect(shares.limits(1000)).toEqual(new Map([['slow', 1]]))
    shares.started('slow')
    expect(shares.limits(1000)).toEqual(new Map([['slow', 0]]))
    expect(shares.halfFree('slow', 1000)).toBe(false)
    shares.ended(attemptOf('slow', 'retry', 'the service stopped during the delivery'), 1000)
    expect(shares.limits(1000)).toEqual(new Map([['slow', 1]]))
  })
  it('shrinks every share as more subscriptions have attempts under way, so that slots stay free for one more', () => {
    const shares = new DeliveryShares(16, 32, new CircuitBreaker(OPTIONS, recordingLog()))
    expect(shares.newcomerShare()).toBe(16)
    for (let attempt = 0; attempt < 16; attempt++) shares.started('slow-a')
    expect({ limits: shares.limits(0), newcomer: shares.newcomerShare() }).toEqual({ limits: new Map([['slow-a', 0]]), newcomer: 10 })
    for (let attempt = 0; attempt < 10; attempt++) shares.started('slow-b')
    // Two slow receivers hold 26 of 32 slots and may take no more: 32 / (1 other + 2) = 10 each.
    expect({ limits: shares.limits(0), newcomer: shares.newcomerShare(), halfFree: [shares.halfFree('slow-a', 0), shares.halfFree('new', 0)] })
      .toEqual({ limits: new Map([['slow-a', 0], ['slow-b', 0]]), newcomer: 8, halfFree: [false, true] })
  })

  it('tells that a claim is worth making once half of a subscription\'s share is free, not at every attempt\'s end', () => {
    const shares = new DeliveryShares(16, 32, new CircuitBreaker(OPTIONS, recordingLog()))
    for (let attempt = 0; attempt < 16; attempt++) shares.started('quick')
    const halfFreeAfterEachEnd: boolean[] = []
    for (let attempt = 0; attempt < 16; attempt++) {
      shares.ended(attemptOf('quick', 'delivered'), 0)
      halfFreeAfterEachEnd.push(shares.halfFree('quick', 0))
    }
    expect(halfFreeAfterEachEnd).toEqual([...Array(7).fill(false), ...Array(9).fill(true)])
  })
})
