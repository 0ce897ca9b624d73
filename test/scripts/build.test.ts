import { spawnSync } from 'node:child_process'
import { statSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

/**
 * `npm start` builds before it serves: with nothing changed since the last build (the run's global setup
 * built dist/), the build writes nothing, so a restart starts at once.
 */
describe('npm run build', () => {
  it('rewrites nothing in dist/ when no source changed since the last build', () => {
    const outputs = ['dist/server.js', 'dist/cli.js', 'dist/app.js', 'dist/.tsbuildinfo']
    const before = outputs.map((file) => statSync(file).mtimeMs)

    const build = spawnSync('npm', ['run', 'build', '--silent'], { encoding: 'utf8' })

    expect({ status: build.status, stderr: build.stderr }).toEqual({ status: 0, stderr: '' })
    expect(outputs.map((file) => statSync(file).mtimeMs)).toEqual(before)
  })
})
