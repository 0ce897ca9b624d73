import { defineConfig } from 'vitest/config'

/** `npm run test:container`: the smoke test of the built image (scripts/container/build-image.sh first). */
export default defineConfig({
  test: {
    include: ['test/container/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: false,
    sequence: { concurrent: false }
  }
})
