import type { LookupAddress } from 'node:dns'
import { describe, expect, it } from 'vitest'
import { isInternalAddress, publicOnlyLookup, webhookUrlRefusal } from '../../src/webhooks/network.js'

const PRIVATE_NETWORK_RULE = 'the service allows that only with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true'

/** What a delivery socket's lookup answers for `host`: the addresses, or the error's code and message. */
async function lookedUp (host: string): Promise<{ addresses: string[] } | { code: string | undefined, message: string }> {
  return await new Promise((resolve) => {
    publicOnlyLookup(host, { all: true }, (error, addresses) => {
      if (error !== null) resolve({ code: error.code, message: error.message })
      else resolve({ addresses: (addresses as LookupAddress[]).map((entry) => entry.address) })
    })
  })
}

/** Each range the block list lacked before release 1.5.1, by a literal inside it, as the URL parser writes it. */
const ADDED_RANGES = [
  ['IPv4-mapped, a public IPv4 address', 'http://[::ffff:8.8.8.8]/hooks', '::ffff:808:808'],
  ['IPv4-mapped, a documentation IPv4 address', 'http://[::ffff:203.0.113.7]:8080/', '::ffff:cb00:7107'],
  ['IPv4-translated (SIIT)', 'http://[::ffff:0:a00:8]/', '::ffff:0:a00:8'],
  ['Teredo', 'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
  ['Teredo, its first address', 'http://[2001::1]/', '2001::1'],
  ['the discard-only prefix', 'http://[100::1]/', '100::1'],
  ['the discard-only prefix, its last address', 'http://[100::ffff:ffff:ffff:ffff]/', '100::ffff:ffff:ffff:ffff']
] as const

describe('the webhook address block list', () => {
  it.each(ADDED_RANGES)('refuses a URL in %s (%s) at subscription', async (_range, url, address) => {
    expect(await webhookUrlRefusal(url, false))
      .toBe(`url must not reach a loopback, private or link-local address (${address}); ${PRIVATE_NETWORK_RULE}`)
    expect(await webhookUrlRefusal(url, true)).toBeUndefined()
  })

  it.each(ADDED_RANGES)('refuses an address in %s (%s) where a delivery socket resolves its host', async (_range, _url, address) => {
    expect(await lookedUp(address)).toEqual({
      code: 'EWEBHOOKINTERNAL',
      message: `${address} resolves to ${address}, an internal address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is not true)`
    })
  })

  it('keeps refusing a private IPv4 address however it is written as IPv6, and the ranges refused before', () => {
    for (const address of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::FFFF:10.0.0.8', '::ffff:a9fe:a9fe', '0:0:0:0:0:ffff:c0a8:101', '::127.0.0.1', '64:ff9b::a00:8', '2002:7f00:1::', '::1', 'fe80::1', 'fd00::1']) {
      expect(isInternalAddress(address), address).toBe(true)
    }
  })

  it('refuses 0.0.0.0, which a socket on Linux reaches as this host, where a delivery socket resolves its host', async () => {
    expect(await lookedUp('0.0.0.0')).toEqual({
      code: 'EWEBHOOKINTERNAL',
      message: '0.0.0.0 resolves to 0.0.0.0, an internal address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is not true)'
    })
  })

  it('refuses the IPv4 ranges no receiver is at: shared (carrier-grade NAT, cloud metadata), IETF protocol, benchmarking, multicast, reserved', () => {
    for (const address of ['100.64.0.1', '100.100.100.200', '100.127.255.254', '192.0.0.8', '198.18.0.1', '198.19.255.254', '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255']) {
      expect(isInternalAddress(address), address).toBe(true)
    }
  })

  it('still lets public addresses through, IPv4 ones and IPv6 ones next to the new ranges', async () => {
    const publicAddresses = ['8.8.8.8', '203.0.113.7', '1.1.1.1', '172.15.255.255', '172.32.0.1', '192.167.255.255', '192.169.0.1', '100.63.255.255', '100.128.0.1', '198.17.255.255', '198.20.0.1', '223.255.255.254', '2001:4860:4860::8888', '2001:1::1', '2606:4700::1111', '100:0:0:1::1', '101::1']
    for (const address of publicAddresses) expect(isInternalAddress(address), address).toBe(false)
    for (const address of publicAddresses) expect(await lookedUp(address)).toEqual({ addresses: [address] })
    expect(await webhookUrlRefusal('http://[2001:4860:4860::8888]/hooks', false)).toBeUndefined()
    expect(await webhookUrlRefusal('http://8.8.8.8/hooks', false)).toBeUndefined()
  })
})
