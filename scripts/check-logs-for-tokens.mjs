// After `PLANTSTORE_TEST_LOG_LEVEL=trace vitest run`: no token that any test configures or presents, nor
// its SHA-256 digest, may appear in any captured log line (the service's and the command line's). Tokens
// are the string literals in test/ whose text says "token", and every token the service generates
// (`pst_` and 43 base64url characters), whichever test made it; no webhook signing secret (`whsec_`); and
// no JWT: neither one the tests signed (test/helpers/issued-tokens.ts records each), nor its signature alone,
// nor anything in a JWT's form.
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const root = new URL('..', import.meta.url).pathname
const files = (folder) => {
  if (!existsSync(folder)) return []
  return readdirSync(folder, { withFileTypes: true })
    .flatMap((entry) => entry.isDirectory() ? files(join(folder, entry.name)) : [join(folder, entry.name)])
}
const tokens = new Set()
for (const file of files(join(root, 'test')).filter((name) => name.endsWith('.ts'))) {
  for (const match of readFileSync(file, 'utf8').matchAll(/'([A-Za-z0-9._~+/-]*token[A-Za-z0-9._~+/-]*)'/g)) {
    // A literal that starts with "/" is a path such as '/admin/tokens', which log lines name as URLs.
    if (match[1].length >= 10 && !match[1].startsWith('/')) tokens.add(match[1])
  }
}
const logFolder = join(root, 'test-artifacts', 'logs')
const logs = files(logFolder).map((file) => readFileSync(file, 'utf8')).join('\n')
const lines = logs.split('\n').filter((line) => line !== '').length
const sha256 = (text) => createHash('sha256').update(text).digest()
const leaked = [...tokens].filter((token) => {
  const digest = sha256(token)
  return logs.includes(token) || logs.toLowerCase().includes(digest.toString('hex')) || logs.includes(digest.toString('base64'))
})
const jwtFolder = join(root, 'test-artifacts', 'jwts')
const jwts = new Set(files(jwtFolder).flatMap((file) => readFileSync(file, 'utf8').split('\n')).filter((jwt) => jwt !== ''))
// Thousands of JWTs: each is looked up among the logs' base64url runs, not searched for in the whole text.
const logRuns = new Set(logs.match(/[A-Za-z0-9_-]{16,}/g) ?? [])
const leakedJwts = [...jwts].filter((jwt) => jwt.split('.').some((segment) => segment.length >= 16 && logRuns.has(segment)))
// A JWT's header is a JSON object, so its base64url starts with "eyJ" ('{"'); so, mostly, does its payload.
const jwtShaped = logs.match(/eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g) ?? []
const generated = logs.match(/pst_[A-Za-z0-9_-]{43}/g) ?? []
const signingSecrets = logs.match(/whsec_[A-Za-z0-9+/]{20,}/g) ?? []
console.log(`searched ${lines} log lines for ${tokens.size} tokens, their digests, generated pst_ tokens, whsec_ secrets, ` +
  `${jwts.size} JWTs the tests signed and anything in a JWT's form`)
if (leaked.length > 0 || generated.length > 0 || signingSecrets.length > 0 || leakedJwts.length > 0 || jwtShaped.length > 0) {
  console.error(`tokens or digests found in the logs: ${leaked.length}; generated tokens found: ${generated.length}; ` +
    `webhook signing secrets found: ${signingSecrets.length}; signed JWTs or their signatures found: ${leakedJwts.length}; ` +
    `JWT-shaped strings found: ${jwtShaped.length}`)
  process.exit(1)
}
if (jwts.size < 20) {
  console.error('too few signed JWTs were recorded: do the JWT tests sign their tokens through test/helpers/identity-provider.ts?')
  process.exit(1)
}
if (lines < 1000) {
  console.error('too few log lines were captured: was PLANTSTORE_TEST_LOG_LEVEL=trace set?')
  process.exit(1)
}
console.log('no token in any log line')
