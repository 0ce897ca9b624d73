import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { markdownFilesUnder } from '../helpers/markdown-files.js'

/**
 * The manual stays readable in minutes: every page of docs/ at most 15 KB (fastify's reference pages are
 * about that size), the README, the front page, at most 25 KB, and what a newcomer reads before a first
 * change (README, architecture, development) at most 40 KB together. Every page of docs/ is listed in
 * docs/index.md, so none is orphaned.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const KB = 1024
const PAGE_LIMIT_BYTES = 15 * KB
const README_LIMIT_BYTES = 25 * KB
const FIRST_CHANGE_LIMIT_BYTES = 40 * KB
const FIRST_CHANGE_PAGES = ['README.md', 'docs/explanations/architecture.md', 'docs/development.md']
const INDEX = 'docs/index.md'

const sizeOf = (page: string): number => statSync(join(ROOT, page)).size
const pages = markdownFilesUnder('docs')

describe('The size of the manual', () => {
  it('finds the pages of docs/ in its folders', () => {
    expect(pages).toEqual(expect.arrayContaining([INDEX, 'docs/development.md', 'docs/reference/api/plants.md']))
  })

  it.each(pages)(`%s: at most ${PAGE_LIMIT_BYTES} bytes`, (page) => {
    expect(sizeOf(page)).toBeLessThanOrEqual(PAGE_LIMIT_BYTES)
  })

  it(`keeps README.md at most ${README_LIMIT_BYTES} bytes`, () => {
    expect(sizeOf('README.md')).toBeLessThanOrEqual(README_LIMIT_BYTES)
  })

  it(`keeps ${FIRST_CHANGE_PAGES.join(' + ')} at most ${FIRST_CHANGE_LIMIT_BYTES} bytes together`, () => {
    const sizes = Object.fromEntries(FIRST_CHANGE_PAGES.map((page) => [page, sizeOf(page)]))
    const total = Object.values(sizes).reduce((sum, size) => sum + size, 0)
    expect(total, JSON.stringify(sizes)).toBeLessThanOrEqual(FIRST_CHANGE_LIMIT_BYTES)
  })

  it(`lists every page of docs/ in ${INDEX}`, () => {
    const index = readFileSync(join(ROOT, INDEX), 'utf8')
    const linked = new Set([...index.matchAll(/\]\(([^)#\s]+\.md)(?:#[^)]*)?\)/g)].map((match) => join('docs', match[1]!)))
    expect(pages.filter((page) => page !== INDEX && !linked.has(page)), `pages ${INDEX} does not link to`).toEqual([])
  })
})
