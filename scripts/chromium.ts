import { existsSync } from 'node:fs'

export interface ChromiumBuild {
  readonly executablePath: string
  /** Where it was found, for the test's failure messages. */
  readonly source: 'CHROMIUM_PATH' | 'system' | '@sparticuz/chromium'
}

const SYSTEM_CHROMIUMS = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome-stable']

/**
 * The browser tests' Chromium, looked for in this order: the `CHROMIUM_PATH` the user gave, a system
 * Chromium, then the build shipped inside the `@sparticuz/chromium` dev dependency, decompressed to the
 * temporary folder on first use, so `npm test` needs nothing installed beyond `npm ci`.
 */
export async function findChromium (env: NodeJS.ProcessEnv = process.env): Promise<ChromiumBuild> {
  const configured = env.CHROMIUM_PATH
  if (configured !== undefined && configured !== '') {
    if (!existsSync(configured)) throw new Error(`CHROMIUM_PATH names ${configured}, which does not exist`)
    return { executablePath: configured, source: 'CHROMIUM_PATH' }
  }
  const system = SYSTEM_CHROMIUMS.find((path) => existsSync(path))
  if (system !== undefined) return { executablePath: system, source: 'system' }
  const { default: packagedChromium } = await import('@sparticuz/chromium')
  return { executablePath: await packagedChromium.executablePath(), source: '@sparticuz/chromium' }
}

/**
 * Flags for a headless run on a machine with no network but loopback: without the background-networking
 * ones Chromium keeps trying to reach Google's services. The web's security model stays on (unlike the
 * serverless flags @sparticuz/chromium suggests), so what a page may do here is what it may do for users.
 */
export const HEADLESS_CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic'
]
