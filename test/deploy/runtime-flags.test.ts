import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8')
const shebangFlags = (file: string) => /^#!\/usr\/bin\/env -S node((?: --\S+)*)\n/.exec(read(file))?.[1]?.trim().split(' ')

const startFlags = () => /node ((?:--\S+ )*)dist\/server\.js/.exec((JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start)?.[1]?.trim().split(' ')

describe('The Node.js flags the service runs with', () => {
  it('are the same for npm start, the container image and the command line, which the bench also reads', () => {
    const imageCommand = /^CMD (\[.*\])$/m.exec(read('Dockerfile'))?.[1]
    const imageFlags = (JSON.parse(imageCommand ?? '[]') as string[]).slice(1, -1)

    expect(startFlags()).toEqual(['--max-semi-space-size=8', '--heap-growing-percent=50'])
    expect(imageFlags).toEqual(startFlags())
    expect(shebangFlags('src/cli.ts')).toEqual(startFlags())
    expect(shebangFlags('bin/plantstore.js')).toEqual(startFlags())
  })

  it('are flags this Node.js accepts', () => {
    const run = spawnSync(process.execPath, [...(startFlags() ?? []), '-e', 'process.stdout.write("ok")'], { encoding: 'utf8' })

    expect(run.stderr).toBe('')
    expect(run.stdout).toBe('ok')
    expect(run.status).toBe(0)
  })
})
