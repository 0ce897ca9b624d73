import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns'
import { BlockList, isIP } from 'node:net'

/**
 * Addresses a webhook may not reach unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true: loopback, private,
 * link-local (cloud metadata services live there), carrier-grade NAT, "this network", multicast and
 * reserved ranges, their IPv6 counterparts, and the IPv6 ranges that carry an IPv4 address.
 */
const internal = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4]
] as const) internal.addSubnet(network, prefix, 'ipv4')
for (const [network, prefix] of [
  // ::/96 (IPv4-compatible), ::ffff:0:0:0/96 (IPv4-translated), NAT64, 6to4 and Teredo carry an IPv4
  // address a gateway or relay may reach: refused whole. 100::/64 only discards (RFC 6666).
  ['::', 96], ['::ffff:0:0:0', 96], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['2002::', 16], ['2001::', 32],
  ['2001:db8::', 32], ['100::', 64]
] as const) internal.addSubnet(network, prefix, 'ipv6')

/**
 * IPv4-mapped addresses (::ffff:0:0/96), refused whole, public ones too: a receiver reachable over IPv4
 * is reached at its IPv4 address, and a mapped one in a URL or an AAAA record is only a way around a
 * filter. A list of its own: Node's BlockList checks IPv4 addresses against this range as mapped ones,
 * so in `internal` it would refuse every IPv4 address.
 */
const ipv4Mapped = new BlockList()
ipv4Mapped.addSubnet('::ffff:0:0', 96, 'ipv6')

export function isInternalAddress (address: string): boolean {
  const family = isIP(address)
  if (family === 4) return internal.check(address, 'ipv4')
  if (family !== 6) return true
  return ipv4Mapped.check(address, 'ipv6') || internal.check(address, 'ipv6')
}

/** The host of a URL as a resolver or `isIP` takes it: IPv6 literals without their brackets. */
export function hostOf (url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
}

export class InternalAddressError extends Error {
  readonly code = 'EWEBHOOKINTERNAL'
  constructor (host: string, address: string) {
    super(`${host} resolves to ${address}, an internal address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is not true)`)
    this.name = 'InternalAddressError'
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/**
 * `dns.lookup` for the delivery sockets that fails when a name resolves to an internal address, so the
 * check holds for the address actually connected to, whatever the name resolved to when it was accepted.
 */
export function publicOnlyLookup (hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error !== null) {
      callback(error, '')
      return
    }
    const refused = addresses.find((entry) => isInternalAddress(entry.address))
    if (refused !== undefined) {
      callback(new InternalAddressError(hostname, refused.address), '')
      return
    }
    if (options.all === true) callback(null, addresses)
    else callback(null, addresses[0]?.address ?? '', addresses[0]?.family)
  })
}

/** Every address a name resolves to, or none when it does not resolve now. */
export async function addressesOf (host: string): Promise<string[]> {
  return await new Promise((resolve) => {
    dnsLookup(host, { all: true }, (error, addresses) => { resolve(error === null ? addresses.map((entry) => entry.address) : []) })
  })
}

/**
 * Why `text` cannot be a webhook URL, or undefined when it can: only `http` and `https`, and unless
 * private networks are allowed, no host that is or resolves to an internal address (a name that does
 * not resolve now is accepted; every delivery checks the address it connects to).
 */
export async function webhookUrlRefusal (text: string, allowPrivateNetworks: boolean): Promise<string | undefined> {
  if (!URL.canParse(text)) return 'url must be an absolute http or https URL'
  const url = new URL(text)
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `url must be an http or https URL, not ${url.protocol.slice(0, -1)}`
  if (allowPrivateNetworks) return undefined
  const host = hostOf(url)
  // A fully qualified name may end in a dot: `localhost.` is `localhost`.
  let end = host.length
  while (end > 0 && host[end - 1] === '.') end--
  const name = host.slice(0, end)
  const internalAddress = isIP(host) !== 0
    ? (isInternalAddress(host) ? host : undefined)
    : name === 'localhost' || name.endsWith('.localhost') ? host : (await addressesOf(host)).find(isInternalAddress)
  if (internalAddress === undefined) return undefined
  return `url must not reach a loopback, private or link-local address (${host === internalAddress ? host : `${host} is ${internalAddress}`}); ` +
    'the service allows that only with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true'
}
