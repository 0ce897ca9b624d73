import { setTimeout as sleep } from 'node:timers/promises'
import { isScope } from '../auth/scope-sets.js'
import { tokenRecordDocument, tokenViewDocument } from '../auth/token-documents.js'
import { AccessTokenRegistry, TOKEN_POLL_MS, type TokenView } from '../auth/token-registry.js'
import { TOKEN_NAME, TOKEN_NAME_RULE } from '../auth/tokens.js'
import type { Config } from '../config.js'
import { isLive, type AccessTokenRecord } from '../store/access-token-store.js'
import { SCOPES, type Scope } from '../store/scopes.js'
import { defineCommand, type CommandGroup } from './command.js'
import { withCommandStore } from './command-store.js'
import { JSON_OPTION, type UsageError } from './options.js'
import { ENVIRONMENT, EXIT_CODES } from './usage.js'

/**
 * `plantstore tokens create|list|revoke`: the store's access tokens, changed through the registry the
 * service uses. What goes to stdout is written only once the command has succeeded; the token of
 * `create` is in it and nowhere else.
 */

export const TOKENS_USAGE = `Usage: plantstore tokens <command> [options]

Commands:
  create --name NAME --scopes SCOPE[,SCOPE...] [--expires-in DURATION] [--json]
  list [--json]
  revoke ID|NAME [--json]

Options:
  -h, --help      show this help; "plantstore tokens <command> --help" shows a command's own

${ENVIRONMENT}
${EXIT_CODES}`

export const CREATE_USAGE = `Usage: plantstore tokens create --name NAME --scopes SCOPE[,SCOPE...] [--expires-in DURATION] [--json]

Makes an access token and prints it on its own line: the only time it is ever shown (the store keeps only
its SHA-256 digest). Running service instances on the database read its tokens every second: the token
is printed once they have, so every one of them accepts it when the command returns.

Options:
  --name NAME             1 to 64 characters of A-Z a-z 0-9 . _ -, not the name of another live token
                          (of the store or of PLANTSTORE_TOKENS)
  --scopes SCOPES         comma-separated, no repeats, at least one of:
                            plants:read   GET /plants, GET /plants/{id}
                            plants:write  POST, PUT, PATCH, DELETE on /plants...
                            admin         everything under /admin/...
  --expires-in DURATION   a positive whole number and a unit: s, m, h, d or w (like 90m or 30d);
                          without it the token does not expire
  --json                  print one JSON document: {id, name, scopes, createdAt, expiresAt?, token}
  -h, --help              show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const LIST_USAGE = `Usage: plantstore tokens list [--json]

Lists every access token, live, expired and revoked, of the store and of PLANTSTORE_TOKENS (source
"environment"), newest first. Neither tokens nor their digests are shown.

Options:
  --json         print one JSON array of {id, name, scopes, source, createdAt, expiresAt?, revokedAt?}
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const REVOKE_USAGE = `Usage: plantstore tokens revoke ID|NAME [--json]

Revokes the token with this id, or else the live token with this name. Running service instances on the
database read its tokens every second: the command returns once they have, so every one of them refuses
the token (401) by then. Revoking a revoked token changes nothing. Tokens of PLANTSTORE_TOKENS cannot be
revoked here: remove them from the token file and send SIGHUP to the service, or from PLANTSTORE_TOKENS
and restart it.

Options:
  --json         print the revoked token as one JSON document:
                 {id, name, scopes, source, createdAt, expiresAt?, revokedAt}
  -h, --help     show this help

${ENVIRONMENT}
${EXIT_CODES}`

export const TOKENS: CommandGroup = { name: 'tokens', usage: TOKENS_USAGE }

/**
 * How long a command that changed a token waits after the change, so that every running service has
 * read it: one poll of the token revision, and the few milliseconds its read of the tokens takes.
 */
const TAKES_EFFECT_MS = TOKEN_POLL_MS + 250

const MEMORY_REFUSAL = 'the tokens of a memory store live only inside the running service; ' +
  'manage them there with POST /admin/tokens, GET /admin/tokens and DELETE /admin/tokens/{id}'

const DURATION = /^([1-9]\d{0,15})([smhdw])$/
const UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }
/** RFC 3339 has four-digit years: an expiry must be shown as one. */
const LAST_EXPIRY_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999)

/** The operation did not happen (exit code 1): a name taken, no such token, a token of the environment. */
export class CommandFailure extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'CommandFailure'
  }
}

interface CreateInvocation {
  readonly command: 'tokens create'
  readonly name: string
  readonly scopes: readonly Scope[]
  /** How long the token lives, in milliseconds; absent for a token that does not expire. */
  readonly expiresInMs?: number
  readonly json: boolean
}

export const tokensCreate = defineCommand<CreateInvocation>({
  name: 'tokens create',
  group: TOKENS,
  summary: 'make an access token (its token is shown only then)',
  usage: CREATE_USAGE,
  parse ({ options, now }) {
    const parsed = options({ name: { type: 'string' }, scopes: { type: 'string' }, 'expires-in': { type: 'string' }, ...JSON_OPTION }, false)
    if (parsed.command === 'help') return parsed
    const { fail, text } = parsed
    const name = text('name')
    const scopesText = text('scopes')
    const expiresIn = text('expires-in')
    if (name === undefined) throw fail('tokens create needs --name')
    if (scopesText === undefined) throw fail('tokens create needs --scopes')
    if (!TOKEN_NAME.test(name)) {
      throw fail(`--name ${TOKEN_NAME_RULE}, got ${JSON.stringify(name)}`)
    }
    const scopes = parseScopes(scopesText, fail)
    const expiresInMs = expiresIn === undefined ? undefined : parseDuration(expiresIn, now, fail)
    return {
      command: 'tokens create',
      name,
      scopes,
      ...(expiresInMs === undefined ? {} : { expiresInMs }),
      json: parsed.values.json === true
    }
  },
  async run ({ name, scopes, expiresInMs, json }, config) {
    const output = await withRegistry(config, async (registry) => {
      const expiresAt = expiresInMs === undefined ? undefined : new Date(Date.now() + expiresInMs)
      const result = await registry.create(expiresAt === undefined ? { name, scopes } : { name, scopes, expiresAt })
      if (result.status === 'name-taken') {
        throw new CommandFailure(`a live access token is already named "${name}"; revoke it or choose another name`)
      }
      return json
        ? jsonDocument({ ...tokenRecordDocument(result.token), token: result.secret })
        : createdText(result.token, result.secret)
    })
    // A token that expires before the services would have read it is handed over at once: waiting would only expire it.
    if (expiresInMs === undefined || expiresInMs > TAKES_EFFECT_MS) await changeTakesEffect(output.changedAt)
    process.stdout.write(output.text)
    return 0
  }
})

export const tokensList = defineCommand<{ readonly command: 'tokens list', readonly json: boolean }>({
  name: 'tokens list',
  group: TOKENS,
  summary: 'list the access tokens of the store and of PLANTSTORE_TOKENS',
  usage: LIST_USAGE,
  parse ({ options }) {
    const parsed = options(JSON_OPTION, false)
    if (parsed.command === 'help') return parsed
    return { command: 'tokens list', json: parsed.values.json === true }
  },
  async run ({ json }, config) {
    const { text } = await withRegistry(config, async (registry) => {
      const tokens = await registry.list()
      return json ? jsonDocument(tokens.map(tokenViewDocument)) : tokenTable(tokens, new Date())
    })
    process.stdout.write(text)
    return 0
  }
})

export const tokensRevoke = defineCommand<{ readonly command: 'tokens revoke', readonly idOrName: string, readonly json: boolean }>({
  name: 'tokens revoke',
  group: TOKENS,
  summary: 'revoke an access token by id or name',
  usage: REVOKE_USAGE,
  parse ({ options }) {
    const parsed = options(JSON_OPTION, true)
    if (parsed.command === 'help') return parsed
    const [idOrName, ...more] = parsed.positionals
    const { fail } = parsed
    if (idOrName === undefined || idOrName === '') throw fail('tokens revoke needs the id or the name of a token')
    if (more.length > 0) throw fail(`tokens revoke takes one id or name, got ${parsed.positionals.length}`)
    return { command: 'tokens revoke', idOrName, json: parsed.values.json === true }
  },
  async run ({ idOrName, json }, config) {
    let acceptedBefore = false
    const output = await withRegistry(config, async (registry) => {
      const found = await registry.find(idOrName)
      if (found === undefined) throw new CommandFailure(`no access token has the id or the live name ${JSON.stringify(idOrName)}`)
      const result = await registry.revoke(found.id)
      if (result.status === 'not-found') throw new CommandFailure(`no access token has the id ${JSON.stringify(found.id)}`)
      if (result.status === 'environment') {
        throw new CommandFailure(`the access token "${found.name}" comes from the environment and cannot be revoked here: ` +
          'remove it from the token file and send SIGHUP to the service, or from PLANTSTORE_TOKENS and restart the service')
      }
      // The services refuse an expired token already: only a live one's revocation is waited on.
      acceptedBefore = isLive(found, new Date())
      const revoked: TokenView = { ...result.token, source: 'store' }
      if (json) return jsonDocument(tokenViewDocument(revoked))
      const when = timeText(revoked.revokedAt)
      return found.revokedAt === undefined
        ? `revoked the access token "${revoked.name}" (id ${revoked.id}) at ${when}\n`
        : `the access token "${revoked.name}" (id ${revoked.id}) was already revoked at ${when}\n`
    })
    if (acceptedBefore) await changeTakesEffect(output.changedAt)
    process.stdout.write(output.text)
    return 0
  }
})

/**
 * Opens the store, reads its tokens into the registry the service uses, and runs `work` with it. Resolves
 * with what `work` made and when it ended, by `performance.now()`: after any change it made was committed.
 */
async function withRegistry (config: Config, work: (registry: AccessTokenRegistry) => Promise<string>): Promise<{ readonly text: string, readonly changedAt: number }> {
  return withCommandStore(config, MEMORY_REFUSAL, async (store) => {
    const registry = new AccessTokenRegistry(store.tokens, config.tokens)
    await registry.refresh()
    const text = await work(registry)
    return { text, changedAt: performance.now() }
  })
}

/** Waits until the running services have read a change committed by `changedAt` (`performance.now()`). */
async function changeTakesEffect (changedAt: number): Promise<void> {
  await sleep(Math.max(0, changedAt + TAKES_EFFECT_MS - performance.now()))
}

/** `plants:read,admin` → the scopes in canonical order; each known, none repeated, at least one. */
function parseScopes (text: string, fail: (message: string) => UsageError): Scope[] {
  const known = `scopes are ${SCOPES.join(', ')}, separated by commas`
  const scopes = text.split(',').map((scope) => scope.trim())
  if (scopes.every((scope) => scope === '')) throw fail(`--scopes needs at least one scope; ${known}`)
  const seen = new Set<string>()
  for (const scope of scopes) {
    if (scope === '') throw fail(`--scopes has an empty entry in ${JSON.stringify(text)}; ${known}`)
    if (!isScope(scope)) throw fail(`--scopes has the unknown scope ${JSON.stringify(scope)}; ${known}`)
    if (seen.has(scope)) throw fail(`--scopes names ${JSON.stringify(scope)} more than once`)
    seen.add(scope)
  }
  return SCOPES.filter((scope) => seen.has(scope))
}

/** `90m`, `30d` → milliseconds; the expiry it gives must be a date with a four-digit year. */
function parseDuration (text: string, now: number, fail: (message: string) => UsageError): number {
  const match = DURATION.exec(text)
  if (match === null) {
    throw fail(`--expires-in must be a positive whole number followed by s, m, h, d or w (like 90m or 30d), got ${JSON.stringify(text)}`)
  }
  const ms = Number(match[1]) * (UNIT_MS[match[2] as string] as number)
  if (now + ms > LAST_EXPIRY_MS) throw fail(`--expires-in ${text} would end after the year 9999`)
  return ms
}

function jsonDocument (value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`
}

/** An RFC 3339 UTC time to the second, as the table shows it. */
function timeText (time: Date | undefined): string {
  return time === undefined ? '-' : time.toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function createdText (token: AccessTokenRecord, secret: string): string {
  return [
    secret,
    '',
    'The access token above is shown only now: only its SHA-256 digest is stored. Keep it safe.',
    `  id       ${token.id}`,
    `  name     ${token.name}`,
    `  scopes   ${token.scopes.join(',')}`,
    `  expires  ${token.expiresAt === undefined ? 'never' : timeText(token.expiresAt)}`,
    ''
  ].join('\n')
}

function statusOf (token: TokenView, now: Date): string {
  if (token.revokedAt !== undefined) return `revoked ${timeText(token.revokedAt)}`
  return isLive(token, now) ? 'live' : 'expired'
}

/** One aligned row per token, newest first, under a header; the last column is left unpadded. */
function tokenTable (tokens: readonly TokenView[], now: Date): string {
  if (tokens.length === 0) return 'no access tokens: none in the store, none in PLANTSTORE_TOKENS\n'
  const rows = [
    ['ID', 'NAME', 'SCOPES', 'SOURCE', 'CREATED', 'EXPIRES', 'STATUS'],
    ...tokens.map((token) => [
      token.id, token.name, token.scopes.join(','), token.source, timeText(token.createdAt), timeText(token.expiresAt), statusOf(token, now)
    ])
  ]
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? []
  return rows.map((row) => row.map((cell, column) => column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)).join('  ')).join('\n') + '\n'
}
