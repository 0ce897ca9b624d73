import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { findChromium } from '../../scripts/chromium.js'
import { temporaryFolder } from '../helpers/app.js'

describe('the browser tests find a Chromium', () => {
  it('takes CHROMIUM_PATH first, whatever else is installed', async () => {
    const executable = join(temporaryFolder(), 'my-chromium')
    writeFileSync(executable, '')
    expect(await findChromium({ CHROMIUM_PATH: executable })).toEqual({ executablePath: executable, source: 'CHROMIUM_PATH' })
  })

  it('says so when CHROMIUM_PATH names nothing, instead of falling back silently', async () => {
    await expect(findChromium({ CHROMIUM_PATH: '/nonexistent/chromium' }))
      .rejects.toThrow('CHROMIUM_PATH names /nonexistent/chromium, which does not exist')
  })
})
