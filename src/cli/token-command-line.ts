import { isScope } from '../auth/scope-sets.js'
import { SCOPES, type Scope } from '../store/scopes.js'
import { TOKEN_NAME, TOKEN_NAME_RULE } from '../auth/tokens.js'
import { isHelp, JSON_OPTION, parseOptions, UsageError, type HelpInvocation } from './options.js'
import { CREATE_USAGE, LIST_USAGE, REVOKE_USAGE, TOKENS_USAGE } from './usage.js'

/** A `plantstore tokens …` command, checked. */
export type TokenInvocation =
  | {
    readonly command: 'tokens create'
    readonly name: string
    readonly scopes: readonly Scope[]
    /** How long the token lives, in milliseconds; absent for a token that does not expire. */
    readonly expiresInMs?: number
    readonly json: boolean
  }
  | { readonly command: 'tokens list', readonly json: boolean }
  | { readonly command: 'tokens revoke', readonly idOrName: string, readonly json: boolean }

export function isTokenInvocation (invocation: { readonly command: string }): invocation is TokenInvocation {
  return invocation.command.startsWith('tokens ')
}

const DURATION = /^([1-9]\d{0,15})([smhdw])$/
const UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }
/** RFC 3339 has four-digit years: an expiry must be shown as one. */
const LAST_EXPIRY_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999)

/** Reads the arguments after `plantstore tokens`; throws UsageError. */
export function parseTokensCommand (args: readonly string[], now: number): TokenInvocation | HelpInvocation {
  const [subcommand, ...rest] = args
  if (subcommand === undefined) throw new UsageError('tokens needs a command: create, list or revoke', 'plantstore tokens')
  if (isHelp(subcommand)) return { command: 'help', text: TOKENS_USAGE }
  if (subcommand.startsWith('-')) throw new UsageError(`unknown option ${JSON.stringify(subcommand)} for "tokens"`, 'plantstore tokens')
  switch (subcommand) {
    case 'create': return parseCreate(rest, now)
    case 'list': return parseList(rest)
    case 'revoke': return parseRevoke(rest)
    default:
      throw new UsageError(`unknown command ${JSON.stringify(`tokens ${subcommand}`)}; the tokens commands are create, list and revoke`, 'plantstore tokens')
  }
}

function parseCreate (args: readonly string[], now: number): TokenInvocation | HelpInvocation {
  const parsed = parseOptions(args, 'tokens create', CREATE_USAGE, {
    name: { type: 'string' }, scopes: { type: 'string' }, 'expires-in': { type: 'string' }, ...JSON_OPTION
  }, false)
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
}

function parseList (args: readonly string[]): TokenInvocation | HelpInvocation {
  const parsed = parseOptions(args, 'tokens list', LIST_USAGE, JSON_OPTION, false)
  if (parsed.command === 'help') return parsed
  return { command: 'tokens list', json: parsed.values.json === true }
}

function parseRevoke (args: readonly string[]): TokenInvocation | HelpInvocation {
  const parsed = parseOptions(args, 'tokens revoke', REVOKE_USAGE, JSON_OPTION, true)
  if (parsed.command === 'help') return parsed
  const [idOrName, ...more] = parsed.positionals
  const { fail } = parsed
  if (idOrName === undefined || idOrName === '') throw fail('tokens revoke needs the id or the name of a token')
  if (more.length > 0) throw fail(`tokens revoke takes one id or name, got ${parsed.positionals.length}`)
  return { command: 'tokens revoke', idOrName, json: parsed.values.json === true }
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
