import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', 'test/container/**', 'test/topologies/**', 'node_modules/**'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Four files at a time on any machine: vitest's default (cores − 1) is one on a 2-core machine, where
    // the files mostly wait on fsync, PostgreSQL, child processes and timers. And each worker keeps the
    // modules it imported from one file to the next (`isolate: false`): importing Fastify, the drivers and
    // the service again for each of 121 files took 120 s of the workers' time. On this 2-core machine
    // (2026-11-28): 321 s with three isolated workers, 323 s with four, 260 s with four that keep their
    // modules. No test file relies on a fresh module graph: the app factory builds every app anew.
    maxWorkers: 4,
    isolate: false,
    reporters: ['default', './test/helpers/slowest-files-reporter.ts']
  }
})
