import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { markdownFilesUnder } from '../helpers/markdown-files.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The manual and the pages around it: README.md, docs/ at any depth, deploy's READMEs, the bench's records. */
const manualPages = (): string[] => [
  'README.md',
  ...markdownFilesUnder('docs'),
  ...markdownFilesUnder('deploy', (file) => file === 'README.md'),
  ...markdownFilesUnder('bench/results')
]

interface Link {
  readonly line: number
  readonly target: string
}

/**
 * The page's lines with fenced code blocks blanked, so that text shown as code is neither a link nor a
 * heading. Line numbers stay those of the file.
 */
function proseLines (markdown: string): string[] {
  let fence: string | undefined
  return markdown.split('\n').map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1]
    if (fence === undefined && marker !== undefined) {
      fence = marker
      return ''
    }
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined
      return ''
    }
    return line
  })
}

/** A line with its inline code spans emptied: a link shown as code is not a link. */
const withoutCodeSpans = (line: string): string => line.replace(/(`+)(?:(?!\1).)+?\1/g, '``')

function linksOf (markdown: string): Link[] {
  const links: Link[] = []
  proseLines(markdown).map(withoutCodeSpans).forEach((text, index) => {
    const line = index + 1
    for (const match of text.matchAll(/\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) {
      links.push({ line, target: match[1]!.replace(/^<|>$/g, '') })
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(text)
    if (definition !== null) links.push({ line, target: definition[1]!.replace(/^<|>$/g, '') })
    for (const match of text.matchAll(/<(?:a|img)\s[^>]*?(?:href|src)="([^"]+)"/gi)) links.push({ line, target: match[1]! })
  })
  return links
}

/** GitHub's heading anchor: lower-case, punctuation removed, spaces to '-'; a repeated one gets -1, -2, … */
function headingSlug (heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[`*]/g, '')
  return text.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-')
}

function anchorsOf (markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  const add = (slug: string): void => {
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  const lines = proseLines(markdown)
  lines.forEach((line, index) => {
    const atx = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)
    if (atx !== null) add(headingSlug(atx[1]!))
    const previous = lines[index - 1]
    if (/^\s{0,3}(=+|-+)\s*$/.test(line) && previous !== undefined && previous.trim() !== '' &&
      !/^\s{0,3}(#|[-*+]\s|\d+[.)]\s|>|\|)/.test(previous)) {
      add(headingSlug(previous))
    }
    for (const match of line.matchAll(/<a\s[^>]*?(?:id|name)="([^"]+)"/gi)) anchors.add(match[1]!)
  })
  return anchors
}

function problemsOf (page: string): string[] {
  const problems: string[] = []
  const markdown = readFileSync(join(ROOT, page), 'utf8')
  for (const { line, target } of linksOf(markdown)) {
    if (/^[a-z][a-z\d+.-]*:/i.test(target)) {
      if (!/^(https?|mailto):/i.test(target)) problems.push(`${page}:${line}: ${target}: only http(s) and mailto links may leave the repository`)
      continue
    }
    const [path = '', anchor] = target.split('#', 2)
    const file = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), decodeURIComponent(path))
    const inRepository = relative(ROOT, file)
    if (inRepository.startsWith('..') || inRepository.startsWith(sep)) {
      problems.push(`${page}:${line}: ${target}: points outside the repository`)
      continue
    }
    if (!existsSync(file)) {
      problems.push(`${page}:${line}: ${target}: ${inRepository} does not exist`)
      continue
    }
    if (anchor === undefined) continue
    if (!file.endsWith('.md') || statSync(file).isDirectory()) {
      problems.push(`${page}:${line}: ${target}: an anchor into ${inRepository}, which has no headings`)
    } else if (!anchorsOf(readFileSync(file, 'utf8')).has(decodeURIComponent(anchor))) {
      problems.push(`${page}:${line}: ${target}: ${inRepository} has no heading with the anchor #${anchor}`)
    }
  }
  return problems
}

describe('The manual: README.md, docs/**, deploy/**/README.md and bench/results/', () => {
  it('reads GitHub anchors the way GitHub makes them', () => {
    expect(headingSlug('Behind a proxy: `TRUST_PROXY`')).toBe('behind-a-proxy-trust_proxy')
    expect(headingSlug('Browsers (CORS)')).toBe('browsers-cors')
    expect(headingSlug('2026-11-23 17:02 UTC: webhooks (issue 13)')).toBe('2026-11-23-1702-utc-webhooks-issue-13')
    expect([...anchorsOf('# A\n\n## Notes\n\n```\n# not a heading\n```\n\n## Notes\n\nSetext\n---\n\n### Use `X_Y` and `{id}`\n')])
      .toEqual(['a', 'notes', 'notes-1', 'setext', 'use-x_y-and-id'])
  })

  it('finds links in prose and not in code', () => {
    const page = '[a](one.md) ![b](img/two.png "title") `[c](not-a-link.md)`\n```\n[d](nor-this.md)\n```\n[e]: <three.md#x>\n'
    expect(linksOf(page).map((link) => link.target)).toEqual(['one.md', 'img/two.png', 'three.md#x'])
  })

  it('walks docs/ into its folders', () => {
    expect(manualPages()).toEqual(expect.arrayContaining(['docs/index.md', 'docs/reference/api/plants.md', 'deploy/kubernetes/README.md', 'bench/results/README.md']))
  })

  it.each(manualPages())('%s: every relative link and anchor resolves inside the repository', (page) => {
    expect(problemsOf(page)).toEqual([])
  })
})
