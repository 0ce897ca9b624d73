import { isIPv6 } from 'node:net'

/** The window failed authentications are counted in: a minute, as the limit's name says. */
export const FAILURE_WINDOW_MS = 60_000
/**
 * At most this many client addresses are followed at once (about 100 bytes each): an attacker cycling
 * addresses cannot grow memory without bound. An address that fails while the table is full is counted
 * by its network instead (IPv4 /24, IPv6 /48) in a second table as large, so filling the first one buys
 * no unlimited guessing; only with both full does a new network go uncounted.
 */
export const MAX_FOLLOWED_ADDRESSES = 100_000

interface Failures {
  count: number
  /** When the window that began with the address's first counted failure ends (on the limit's clock). */
  readonly endsAt: number
}

/**
 * Counts the 401s each client address earns, in a window that starts with its first one; from the
 * `limit`th, every request from the address needing a token is refused with 429 until the window
 * ends. IPv6 addresses are counted by their /64, which one host usually holds whole. Windows all last
 * as long, so the table's insertion order is the order they end in, and the ended ones are dropped
 * from its front: no timer, no scan.
 */
export class FailedAuthenticationLimit {
  private readonly failures = new Map<string, Failures>()
  /** Failures of addresses the first table had no room for, by network. */
  private readonly overflow = new Map<string, Failures>()

  /** `limit` failures per window; 0 turns the limit off. `now` is a monotonic clock in milliseconds. */
  constructor (
    private readonly limit: number,
    private readonly now: () => number = () => performance.now()
  ) {}

  /** The seconds until `address` may try again, or undefined when it may now. */
  retryAfterSeconds (address: string): number | undefined {
    if (this.limit === 0 || this.failures.size === 0) return undefined
    const failures = this.failures.get(keyOf(address)) ?? this.overflow.get(networkOf(address))
    if (failures === undefined || failures.count < this.limit) return undefined
    const remainingMs = failures.endsAt - this.now()
    return remainingMs > 0 ? Math.ceil(remainingMs / 1000) : undefined
  }

  /** Counts one failed authentication from `address`. */
  recordFailure (address: string): void {
    if (this.limit === 0) return
    const now = this.now()
    this.dropEndedWindows(now)
    const key = keyOf(address)
    const followed = this.failures.size < MAX_FOLLOWED_ADDRESSES || this.failures.has(key)
    count(followed ? this.failures : this.overflow, followed ? key : networkOf(address), now)
  }

  /** How many addresses are followed now (for tests and metrics). */
  get followedAddresses (): number {
    return this.failures.size
  }

  private dropEndedWindows (now: number): void {
    for (const table of [this.failures, this.overflow]) {
      for (const [key, failures] of table) {
        if (failures.endsAt > now) break
        table.delete(key)
      }
    }
  }
}

function count (table: Map<string, Failures>, key: string, now: number): void {
  const failures = table.get(key)
  if (failures !== undefined) failures.count++
  else if (table.size < MAX_FOLLOWED_ADDRESSES) table.set(key, { count: 1, endsAt: now + FAILURE_WINDOW_MS })
}

/** The network an address is counted by when its own entry has no room: IPv4 /24, IPv6 /48. */
function networkOf (address: string): string {
  const key = keyOf(address)
  if (key.endsWith('::/64')) return key.split(':').slice(0, 3).join(':') + '::/48'
  return key.split('.').slice(0, 3).join('.') + '.0/24'
}

/** The address itself, or for IPv6 its /64 (IPv4-mapped IPv6 addresses are their IPv4 address). */
function keyOf (address: string): string {
  if (address.startsWith('::ffff:') && !address.slice(7).includes(':')) return address.slice(7)
  if (!isIPv6(address)) return address
  return expandIPv6(address).slice(0, 4).join(':') + '::/64'
}

/** The eight 16-bit groups of an IPv6 address, in lower case without leading zeros. */
function expandIPv6 (address: string): string[] {
  const withoutZone = address.split('%')[0] ?? address
  const [head = '', tail] = withoutZone.split('::')
  const headGroups = head === '' ? [] : head.split(':')
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':')
  const missing = tail === undefined ? 0 : 8 - headGroups.length - tailGroups.length
  return [...headGroups, ...Array<string>(missing).fill('0'), ...tailGroups]
    .map((group) => group.includes('.') ? group : (Number.parseInt(group, 16) || 0).toString(16))
}
