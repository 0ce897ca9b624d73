import { defineConfig } from 'vitest/config'

/**
 * `npm run test:topologies`: the service against the deployments an operator builds around PostgreSQL
 * (Debian's PostgreSQL server and PgBouncer, which scripts/topologies/install-tools.sh installs): a
 * pooler in session and transaction mode, a streaming standby promoted behind one address, a proxy
 * that delays, holds or resets traffic. One file at a time: each starts servers on fixed ports.
 */
export default defineConfig({
  test: {
    include: ['test/topologies/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false
  }
})
