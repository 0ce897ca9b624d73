import { randomUUID } from 'node:crypto'
import { isIP } from 'node:net'
import type { Agent } from 'undici'
import { ClaimAfterSettleError, type ClaimedDelivery, type ClaimRequest, type SettledAttempt, type WebhookStore } from '../store/webhook-store.js'
import { CIRCUIT_THRESHOLD, CircuitBreaker } from './circuit-breaker.js'
import { DeliveryShares, STOPPED_DURING_DELIVERY } from './delivery-shares.js'
import { hostOf, InternalAddressError, isInternalAddress, publicOnlyLookup } from './network.js'
import { DELIVERY_TIMEOUT_MS, describe } from './receiver-answers.js'
import { ReceiverPosts } from './receiver-post.js'
import type { SecretBox } from './secrets.js'
import { signatureHeader, SigningKeys, webhookTimestamp } from './signature.js'

export interface DispatcherOptions {
  /** Deliveries this instance has under way at once. */
  readonly concurrency: number
  /** Of those, the most one subscription may have under way (its share; see delivery-shares.ts). */
  readonly concurrencyPerSubscription: number
  /** The wait before the first retry; it doubles with every failed attempt, up to `maxRetryMs`. */
  readonly firstRetryMs: number
  readonly maxRetryMs: number
  /** How long after its write an event is retried before it is marked failed. */
  readonly retryForMs: number
  /** How long a claimed event is this instance's alone; another instance retries it after that. */
  readonly leaseMs: number
  /** How often an idle dispatcher looks for due events. */
  readonly pollMs: number
  readonly allowPrivateNetworks: boolean
}

/** Told about every attempt as it ends (metrics). */
export interface DeliveryObserver {
  readonly deliveryEnded: (result: SettledAttempt['result'], seconds: number) => void
  /** How many subscriptions' circuits are open in this instance, after every attempt. */
  readonly circuitsOpen: (count: number) => void
}

/** Traces every attempt (when tracing is on). */
export interface DeliveryTracer {
  /**
   * Runs `attempt` in a span of its own, which ends with the attempt's outcome; `attempt` sends the
   * headers it is given (`traceparent`), so the receiver's spans can follow on from it.
   */
  readonly traceAttempt: (
    delivery: ClaimedDelivery,
    attempt: (traceHeaders: Readonly<Record<string, string>>) => Promise<SettledAttempt>
  ) => Promise<SettledAttempt>
}

export interface DispatcherLog {
  warn (details: object, message: string): void
  debug (details: object, message: string): void
}

const ATTEMPT_RETENTION_MS = 7 * 24 * 3600_000
/**
 * Outcomes are recorded together, at most this long after the first of them: one transaction for tens
 * of attempts rather than a few costs the store a fraction of the page writes (bench/results/2026-11-23-1702-issue-13-webhooks.md).
 */
const SETTLE_GATHER_MS = 10
const PRUNE_EVERY_MS = 10 * 60_000
/** Subscription URLs whose parts are kept; past that the cache starts again. */
const MOST_TARGETS = 10_000

/** Where a subscription's URL posts to, as undici's `request` would make it of the URL. */
interface ReceiverTarget {
  readonly origin: string
  readonly path: string
  /** The address written out in the URL when it is one that is not allowed. */
  readonly refusedAddress: string | undefined
}

/**
 * Delivers the outbox: claims due events (each under a lease, so with several instances exactly one
 * makes each attempt; each subscription within its share of the slots and while its circuit is closed,
 * delivery-shares.ts), posts them signed per the Standard Webhooks specification over keep-alive
 * connections, and settles each outcome: delivered, due again after an exponential backoff with
 * jitter, failed after `retryForMs`, or the subscription disabled on `410 Gone`.
 */
export class WebhookDispatcher {
  private readonly owner = randomUUID()
  /** undici and its keep-alive agent, loaded at the first delivery: a service without one never holds them. */
  private agent: Promise<Agent> | undefined
  private readonly posts: ReceiverPosts
  private readonly keys: SigningKeys
  private readonly targets = new Map<string, ReceiverTarget>()
  /** Set by stop(): nothing is claimed from then on, and the deliveries under way are cut short. */
  private stopped = false
  private inFlight = 0
  /** Circuits per subscription, in this instance: how many receivers are being left alone (metrics). */
  readonly circuits: CircuitBreaker
  private readonly shares: DeliveryShares
  private readonly deliveries = new Set<Promise<void>>()
  private readonly toSettle: SettledAttempt[] = []
  private settling: Promise<void> | undefined
  private settleTimer: NodeJS.Timeout | undefined
  /** The claim under way, if any: deliveries start only from its end. */
  private claiming: Promise<void> | undefined
  private outboxUnreadable = false
  private timer: NodeJS.Timeout | undefined
  private lastPrune = 0
  observer: DeliveryObserver | undefined
  tracer: DeliveryTracer | undefined

  constructor (
    private readonly store: WebhookStore,
    private readonly secrets: SecretBox,
    private readonly options: DispatcherOptions,
    private readonly log: DispatcherLog,
    private readonly userAgent: string
  ) {
    // A circuit's cool-down follows the retry schedule, so an event waits no longer than its retries would.
    this.circuits = new CircuitBreaker({ threshold: CIRCUIT_THRESHOLD, firstCoolDownMs: options.firstRetryMs, maxCoolDownMs: options.maxRetryMs }, log)
    this.shares = new DeliveryShares(Math.min(options.concurrencyPerSubscription, options.concurrency), options.concurrency, this.circuits)
    this.posts = new ReceiverPosts(() => this.deliveryAgent())
    this.keys = new SigningKeys(secrets)
  }

  start (): void {
    this.wake()
  }

  /** Looks for due events now rather than at the next poll. */
  wake (): void {
    if (this.stopped) return
    clearTimeout(this.timer)
    this.timer = undefined
    this.claimAndDeliver().catch(() => {})
  }

  /**
   * Stops claiming, cuts the deliveries under way short and gives their events back (due at once, for
   * whichever instance claims next), and waits until every outcome is recorded.
   */
  async stop (): Promise<void> {
    this.stopped = true
    this.posts.stop(new Error(STOPPED_DURING_DELIVERY))
    clearTimeout(this.timer)
    await this.claiming
    await Promise.allSettled(this.deliveries)
    clearTimeout(this.settleTimer)
    this.settleTimer = undefined
    this.settleAll()
    while (this.settling !== undefined) await this.settling
    if (this.agent !== undefined) await (await this.agent).destroy()
  }

  private deliveryAgent (): Promise<Agent> {
    this.agent ??= import('undici').then(({ Agent }) => new Agent({
      connections: this.options.concurrency,
      keepAliveTimeout: 30_000,
      headersTimeout: DELIVERY_TIMEOUT_MS,
      bodyTimeout: DELIVERY_TIMEOUT_MS,
      connect: {
        timeout: DELIVERY_TIMEOUT_MS,
        ...(this.options.allowPrivateNetworks ? {} : { lookup: publicOnlyLookup })
      }
    }))
    return this.agent
  }

  private later (): void {
    if (this.stopped || this.timer !== undefined) return
    this.timer = setTimeout(() => { this.timer = undefined; this.claimAndDeliver().catch(() => {}) }, this.options.pollMs)
    this.timer.unref()
  }

  private async claimAndDeliver (): Promise<void> {
    if (this.claiming !== undefined || this.stopped) return
    const free = this.options.concurrency - this.inFlight
    // Every slot busy: an attempt's end wakes this when its subscription can take more; the poll
    // covers the others (a circuit opened by that end, say).
    if (free <= 0) {
      this.later()
      return
    }
    let claimed: ClaimedDelivery[] = []
    this.claiming = (async () => {
      try {
        const now = Date.now()
        if (now - this.lastPrune > PRUNE_EVERY_MS) {
          this.lastPrune = now
          await this.store.pruneAttempts(now - ATTEMPT_RETENTION_MS)
        }
        claimed = await this.claimSettling({
          owner: this.owner,
          now,
          leaseMs: this.options.leaseMs,
          limit: free,
          perSubscription: this.shares.newcomerShare(),
          subscriptionLimits: this.shares.limits(now)
        })
        if (this.outboxUnreadable) this.log.warn({}, 'webhooks: the outbox can be read again')
        this.outboxUnreadable = false
      } catch (error) {
        // Said once per outage, not at every poll.
        if (!this.outboxUnreadable) this.log.warn({ err: error }, 'webhooks: cannot read the outbox; trying again every poll')
        this.outboxUnreadable = true
      }
      // Claimed during a stop, they fail at once and go back to the outbox with the others.
      for (const delivery of claimed) this.deliver(delivery)
    })()
    await this.claiming
    this.claiming = undefined
    // Deliveries that end free their slots and wake this at once; the poll covers everything else.
    this.later()
  }

  /**
   * A claim that records the outcomes waiting to be recorded first, taken from `toSettle` only now (unless
   * a settle is under way, whose order they keep). Such a claim is the instance's settle under way
   * (`settling`): two settle transactions of one instance at once could deadlock each other (PostgreSQL)
   * or record attempts out of order. When the claim fails, its outcomes go back to the front of
   * `toSettle` for the next settle, unless the store says they were recorded.
   */
  private async claimSettling (request: ClaimRequest): Promise<ClaimedDelivery[]> {
    if (this.settling !== undefined || this.toSettle.length === 0) return await this.store.claim(request)
    clearTimeout(this.settleTimer)
    this.settleTimer = undefined
    const settled = this.toSettle.splice(0)
    const claim = this.store.claim({ ...request, settled })
    const settling = claim.then(() => {}, (error: unknown) => {
      if (error instanceof ClaimAfterSettleError) return
      this.toSettle.unshift(...settled)
      this.log.warn({ err: error, attempts: settled.length }, 'webhooks: cannot record delivery outcomes with a claim; recording them again')
    }).finally(() => { this.settleEnded() })
    this.settling = settling
    return await claim
  }

  private deliver (delivery: ClaimedDelivery): void {
    this.inFlight++
    this.shares.started(delivery.subscriptionId)
    const startedAt = performance.now()
    const attempt = this.tracer === undefined
      ? this.attempt(delivery)
      : this.tracer.traceAttempt(delivery, (traceHeaders) => this.attempt(delivery, traceHeaders))
    const done = attempt.then((settled) => {
      this.observer?.deliveryEnded(settled.result, (performance.now() - startedAt) / 1000)
      this.inFlight--
      this.shares.ended(settled, Date.now())
      this.observer?.circuitsOpen(this.circuits.open)
      this.deliveries.delete(done)
      this.toSettle.push(settled)
      this.settleSoon()
      // A claim is one transaction of the store's: it waits until it can take half a share of the
      // subscription whose attempt ended, rather than one row at every attempt's end. The poll finds
      // the events of others meanwhile, and those of everyone when this end opened the circuit.
      if (this.shares.halfFree(settled.delivery.subscriptionId, Date.now())) this.wake()
      else this.later()
    })
    this.deliveries.add(done)
  }

  private settleSoon (): void {
    if (this.settleTimer !== undefined || this.settling !== undefined || this.stopped) return
    this.settleTimer = setTimeout(() => {
      this.settleTimer = undefined
      this.settleAll()
    }, SETTLE_GATHER_MS)
  }

  private settleAll (): void {
    if (this.settling !== undefined || this.toSettle.length === 0) return
    const batch = this.toSettle.splice(0)
    this.settling = this.store.settle(this.owner, batch)
      .catch((error: unknown) => {
        // The events stay leased to this instance until the lease runs out; then they go out again.
        this.log.warn({ err: error, attempts: batch.length }, 'webhooks: cannot record delivery outcomes; the events will be sent again')
      })
      .finally(() => { this.settleEnded() })
  }

  /** After a settle (or a claim that carried outcomes): the outcomes that ended meanwhile are next. */
  private settleEnded (): void {
    this.settling = undefined
    if (this.stopped) this.settleAll()
    else if (this.toSettle.length > 0) this.settleSoon()
  }

  private async attempt (delivery: ClaimedDelivery, traceHeaders?: Readonly<Record<string, string>>): Promise<SettledAttempt> {
    const at = Date.now()
    let statusCode: number | undefined
    try {
      statusCode = await this.post(delivery, at, traceHeaders)
    } catch (error) {
      if (this.stopped) {
        return { delivery, at, error: STOPPED_DURING_DELIVERY, result: 'retry', nextAttemptAt: at }
      }
      return this.failed(delivery, at, { error: describe(error) })
    }
    if (statusCode >= 200 && statusCode < 300) return { delivery, at, statusCode, result: 'delivered' }
    if (statusCode === 410) {
      this.log.warn({ subscription: delivery.subscriptionId }, 'webhooks: the receiver answered 410 Gone; the subscription is disabled')
      return { delivery, at, statusCode, result: 'gone' }
    }
    return this.failed(delivery, at, { statusCode })
  }

  private failed (delivery: ClaimedDelivery, at: number, outcome: { statusCode: number } | { error: string }): SettledAttempt {
    const attempts = delivery.attempts + 1
    const nextAttemptAt = at + this.backoff(attempts)
    if (nextAttemptAt > delivery.createdAt + this.options.retryForMs) {
      this.log.warn({ subscription: delivery.subscriptionId, event: delivery.eventId, attempts, ...outcome },
        'webhooks: an event is given up on after its last retry')
      return { delivery, at, ...outcome, result: 'failed' }
    }
    this.log.debug({ subscription: delivery.subscriptionId, event: delivery.eventId, attempts, ...outcome, retryInMs: nextAttemptAt - at },
      'webhooks: delivery failed; retrying')
    return { delivery, at, ...outcome, result: 'retry', nextAttemptAt }
  }

  /** About `firstRetryMs` doubled for every attempt after the first, ±20 % so retries do not arrive in step. */
  private backoff (attempts: number): number {
    const doubled = this.options.firstRetryMs * 2 ** Math.min(attempts - 1, 30)
    return Math.round(Math.min(this.options.maxRetryMs, doubled * (0.8 + 0.4 * Math.random())))
  }

  /** One signed POST; resolves with the receiver's status code. */
  private async post (delivery: ClaimedDelivery, at: number, traceHeaders?: Readonly<Record<string, string>>): Promise<number> {
    const { origin, path, refusedAddress } = this.targetOf(delivery.url)
    if (refusedAddress !== undefined) throw new InternalAddressError(refusedAddress, refusedAddress)
    const headers = [
      'content-type', 'application/json',
      'user-agent', this.userAgent,
      'webhook-id', delivery.eventId,
      'webhook-timestamp', String(webhookTimestamp(at)),
      'webhook-signature', signatureHeader(delivery, at, this.keys),
      'webhook-event', delivery.type
    ]
    if (traceHeaders !== undefined) for (const name in traceHeaders) headers.push(name, traceHeaders[name] as string)
    // The agent's headersTimeout bounds the wait for the status; a timer per delivery
    // (AbortSignal.timeout) cost more than the HMAC.
    return await this.posts.post({ origin, path, headers, body: delivery.body, timeoutMs: DELIVERY_TIMEOUT_MS })
  }

  /** The parts of a subscription's URL, parsed once. */
  private targetOf (url: string): ReceiverTarget {
    const known = this.targets.get(url)
    if (known !== undefined) return known
    const parsed = new URL(url)
    const host = hostOf(parsed)
    const target: ReceiverTarget = {
      origin: parsed.origin,
      path: parsed.search === '' ? parsed.pathname : `${parsed.pathname}${parsed.search}`,
      // A name is checked where the socket resolves it (publicOnlyLookup); an address here.
      refusedAddress: !this.options.allowPrivateNetworks && isIP(host) !== 0 && isInternalAddress(host) ? host : undefined
    }
    if (this.targets.size >= MOST_TARGETS) this.targets.clear()
    this.targets.set(url, target)
    return target
  }
}
