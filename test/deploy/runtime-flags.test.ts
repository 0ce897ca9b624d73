import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8')

describe('The Node.js flags the service runs with', () => {
  it('are the same for npm start and the container image, which the bench also reads', () => {
    const startScript = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start
    const startFlags = /node ((?:--\S+ )*)dist\/server\.js/.exec(startScript)?.[1]?.trim().split(' ')
    const imageCommand = /^CMD (\[.*\])$/m.exec(read('Dockerfile'))?.[1]
    const imageFlags = (JSON.parse(imageCommand ?? '[]') as string[]).slice(1, -1)

    expect(startFlags).toEqual(['--max-semi-space-size=8'])
    expect(imageFlags).toEqual(startFlags)
  })
})
