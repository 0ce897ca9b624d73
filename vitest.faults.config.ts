import { defineConfig } from 'vitest/config'

/** `npm run test:faults`: the fault-and-abuse suite (crashes, outages, overload, hostile input). */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: false
  }
})
