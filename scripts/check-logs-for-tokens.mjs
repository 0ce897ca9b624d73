// After `PLANTSTORE_TEST_LOG_LEVEL=trace vitest run`: no token that any test configures or presents may
// appear in any captured log line. Tokens are the string literals in test/ whose name says "token".
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const root = new URL('..', import.meta.url).pathname
const files = (folder) => readdirSync(folder, { withFileTypes: true })
  .flatMap((entry) => entry.isDirectory() ? files(join(folder, entry.name)) : [join(folder, entry.name)])
const tokens = new Set()
for (const file of files(join(root, 'test')).filter((name) => name.endsWith('.ts'))) {
  for (const match of readFileSync(file, 'utf8').matchAll(/'([A-Za-z0-9._~+/-]*token[A-Za-z0-9._~+/-]*)'/g)) {
    if (match[1].length >= 10) tokens.add(match[1])
  }
}
const logFolder = join(root, 'test-artifacts', 'logs')
const logs = files(logFolder).map((file) => readFileSync(file, 'utf8')).join('\n')
const lines = logs.split('\n').filter((line) => line !== '').length
const leaked = [...tokens].filter((token) => logs.includes(token))
console.log(`searched ${lines} log lines for ${tokens.size} tokens`)
if (leaked.length > 0) {
  console.error(`tokens found in the logs: ${leaked.length}`)
  process.exit(1)
}
if (lines < 1000) {
  console.error('too few log lines were captured: was PLANTSTORE_TEST_LOG_LEVEL=trace set?')
  process.exit(1)
}
console.log('no token in any log line')
