import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', 'test/container/**', 'test/topologies/**', 'node_modules/**'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time on any machine: vitest's default (cores − 1) is one on a 2-core machine, where
    // the files mostly wait on fsync, PostgreSQL and child processes (438 s there against 260 s with two).
    maxWorkers: 2,
    reporters: ['default', './test/helpers/slowest-files-reporter.ts']
  }
})
