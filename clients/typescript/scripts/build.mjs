// `npm run build` (and `prepack`): dist/index.js, the client and the service's exact JSON parser bundled
// into one ES module for Node.js and browsers, and dist/*.d.ts, its declarations. Runs after the
// repository root's `npm ci`: esbuild and typescript come from the root's node_modules.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const folder = fileURLToPath(new URL('..', import.meta.url))
const dist = join(folder, 'dist')
rmSync(dist, { recursive: true, force: true })

await build({
  entryPoints: [join(folder, 'src/index.ts')],
  outfile: join(dist, 'index.js'),
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  legalComments: 'none',
  logLevel: 'warning'
})

// The parser lives outside this folder (src/exact-json-parser.ts of the service), so tsc writes the
// declarations under their common root, the repository's; only this package's own are kept.
const declarations = mkdtempSync(join(tmpdir(), 'plantstore-client-types-'))
try {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
  execFileSync(process.execPath, [tsc, '-p', join(folder, 'tsconfig.json'), '--noEmit', 'false', '--declaration', '--emitDeclarationOnly', '--outDir', declarations], { stdio: 'inherit' })
  cpSync(join(declarations, 'clients/typescript/src'), dist, { recursive: true })
} finally {
  rmSync(declarations, { recursive: true, force: true })
}
