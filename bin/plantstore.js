#!/usr/bin/env -S node --max-semi-space-size=8 --heap-growing-percent=50
// The `plantstore` command of a checkout (`npx plantstore …`, `node bin/plantstore.js …`): runs the
// compiled CLI, dist/cli.js. In a fresh checkout, before any build, it builds first, as `npm start`
// does; the build's output goes to stderr, so stdout holds only the command's own output.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const cli = new URL('../dist/cli.js', import.meta.url)

if (!existsSync(cli)) {
  process.stderr.write('plantstore: dist/cli.js is missing; building it with "npm run build"\n')
  const build = spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 2, 2] })
  if (build.status !== 0 || !existsSync(cli)) {
    const reason = build.error === undefined ? `exit code ${build.status ?? build.signal}` : build.error.message
    process.stderr.write(`plantstore: the build failed (${reason}); run "npm ci" and "npm run build" in ${root}\n`)
    process.exit(1)
  }
}
await import(cli.href)
