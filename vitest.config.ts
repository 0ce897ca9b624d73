import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', 'test/container/**', 'test/topologies/**', 'node_modules/**'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Three files at a time on any machine: vitest's default (cores − 1) is one on a 2-core machine, where
    // the files mostly wait on fsync, PostgreSQL, child processes and timers (438 s there against 260 s
    // with two). Once the field-rule suites shared their apps, what was left waited even more: on this
    // 2-core machine, busy with other work (load 8 to 13), 327 s with three against 413 s with two.
    maxWorkers: 3,
    reporters: ['default', './test/helpers/slowest-files-reporter.ts']
  }
})
