import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/**
 * The files under a folder of the repository, at any depth, whose name `wanted` accepts (Markdown by
 * default), as repository paths with `/`, sorted: the pages the manual's checks walk.
 */
export function markdownFilesUnder (folder: string, wanted: (name: string) => boolean = (name) => name.endsWith('.md')): string[] {
  const found: string[] = []
  const walk = (relativeFolder: string): void => {
    for (const entry of readdirSync(join(ROOT, relativeFolder), { withFileTypes: true })) {
      const path = `${relativeFolder}/${entry.name}`
      if (entry.isDirectory()) walk(path)
      else if (wanted(entry.name)) found.push(path)
    }
  }
  walk(folder)
  return found.sort()
}
