export interface CircuitBreakerOptions {
  /** Consecutive failed attempts of a subscription that open its circuit. */
  readonly threshold: number
  /** The first cool-down of an open circuit; it doubles with every failed probe, up to `maxCoolDownMs`. */
  readonly firstCoolDownMs: number
  readonly maxCoolDownMs: number
}

export interface CircuitLog {
  warn (details: object, message: string): void
}

interface Circuit {
  /** Failed attempts in a row. */
  failures: number
  /** Set while open: until then nothing of the subscription is claimed; after it, one probe. */
  openUntil: number | undefined
  /** Probes that failed since the circuit opened. */
  failedProbes: number
}

/** The default: 5 failures in a row open a circuit. */
export const CIRCUIT_THRESHOLD = 5

/**
 * One circuit per subscription, in this instance's memory: a receiver whose attempts keep failing
 * (timeouts, refused connections, error statuses) is left alone for a cool-down, then tried with one
 * probe; a success closes the circuit, a failure opens it again for twice as long. While it is open the
 * subscription's events wait in the outbox: they are neither attempted nor counted as attempted, so
 * their retry schedule is not spent on a receiver known to be down.
 */
export class CircuitBreaker {
  private readonly circuits = new Map<string, Circuit>()

  constructor (private readonly options: CircuitBreakerOptions, private readonly log: CircuitLog) {}

  /** How many attempts of the subscription may be under way: 0 while open, 1 for the probe, undefined when closed. */
  capOf (subscriptionId: string, now: number): number | undefined {
    const openUntil = this.circuits.get(subscriptionId)?.openUntil
    if (openUntil === undefined) return undefined
    return now < openUntil ? 0 : 1
  }

  /** The subscriptions whose circuit is not closed, with `capOf` for each. */
  caps (now: number): Map<string, number> {
    const caps = new Map<string, number>()
    for (const [subscriptionId, circuit] of this.circuits) {
      if (circuit.openUntil !== undefined) caps.set(subscriptionId, now < circuit.openUntil ? 0 : 1)
    }
    return caps
  }

  /** How many circuits are open (or waiting for their probe). */
  get open (): number {
    let open = 0
    for (const circuit of this.circuits.values()) if (circuit.openUntil !== undefined) open++
    return open
  }

  succeeded (subscriptionId: string): void {
    const circuit = this.circuits.get(subscriptionId)
    if (circuit === undefined) return
    this.circuits.delete(subscriptionId)
    if (circuit.openUntil !== undefined) {
      this.log.warn({ subscription: subscriptionId }, 'webhooks: the receiver answers again; its circuit is closed and its events go out')
    }
  }

  failed (subscriptionId: string, now: number): void {
    const circuit = this.circuits.get(subscriptionId) ?? { failures: 0, openUntil: undefined, failedProbes: 0 }
    this.circuits.set(subscriptionId, circuit)
    circuit.failures++
    if (circuit.openUntil === undefined) {
      if (circuit.failures < this.options.threshold) return
      circuit.openUntil = now + this.coolDown(0)
      this.log.warn({ subscription: subscriptionId, failures: circuit.failures, coolDownMs: this.coolDown(0) },
        'webhooks: the receiver keeps failing; its circuit is open: its events wait, then one probe tries it')
      return
    }
    // An attempt made before the circuit opened changes nothing; a failed probe doubles the cool-down.
    if (now < circuit.openUntil) return
    circuit.failedProbes++
    circuit.openUntil = now + this.coolDown(circuit.failedProbes)
  }

  /** Forgets a subscription (deleted or disabled). */
  forget (subscriptionId: string): void {
    this.circuits.delete(subscriptionId)
  }

  private coolDown (failedProbes: number): number {
    return Math.min(this.options.maxCoolDownMs, this.options.firstCoolDownMs * 2 ** Math.min(failedProbes, 30))
  }
}
