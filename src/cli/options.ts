import { parseArgs, type ParseArgsConfig } from 'node:util'

/** The command line is wrong (exit code 2): the message says what, and where to find the usage. */
export class UsageError extends Error {
  constructor (message: string, helpCommand = 'plantstore') {
    super(`${message} (see "${helpCommand} --help")`)
    this.name = 'UsageError'
  }
}

export interface HelpInvocation { readonly command: 'help', readonly text: string }

export const JSON_OPTION = { json: { type: 'boolean' } } as const
const HELP = { help: { type: 'boolean', short: 'h' } } as const

export const isHelp = (arg: string | undefined): boolean => arg === '-h' || arg === '--help'

export type Options = NonNullable<ParseArgsConfig['options']>
export type Values = Record<string, string | boolean | undefined>

export interface ParsedOptions {
  readonly command: 'parsed'
  readonly values: Values
  readonly positionals: string[]
  /** The value of a string option, or undefined when it was not given. */
  readonly text: (option: string) => string | undefined
  /** A UsageError pointing at this command's help. */
  readonly fail: (message: string) => UsageError
}

/**
 * `parseArgs` in strict mode, with its errors turned into one-line usage errors and an option given
 * twice refused (it would otherwise take the last silently). `--help` anywhere before `--` wins over
 * every other problem of the line.
 */
export function parseOptions (args: readonly string[], command: string, usage: string, options: Options, allowPositionals: boolean):
  HelpInvocation | ParsedOptions {
  const helpCommand = `plantstore ${command}`
  let parsed
  try {
    parsed = parseArgs({ args: [...args], options: { ...options, ...HELP }, strict: true, allowPositionals, tokens: true })
  } catch (error) {
    const beforeDashes = args.indexOf('--') === -1 ? args : args.slice(0, args.indexOf('--'))
    if (beforeDashes.some(isHelp)) return { command: 'help', text: usage }
    throw new UsageError(describeParseError(error, command), helpCommand)
  }
  if (parsed.values.help === true) return { command: 'help', text: usage }
  const seen = new Set<string>()
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once`, helpCommand)
    seen.add(token.name)
  }
  const values: Values = parsed.values
  return {
    command: 'parsed',
    values,
    positionals: parsed.positionals,
    text: (option) => { const value = values[option]; return typeof value === 'string' ? value : undefined },
    fail: (message) => new UsageError(message, helpCommand)
  }
}

/** One line from `parseArgs`'s error, naming the option (Node's own text spans lines and speaks of "arguments"). */
function describeParseError (error: unknown, command: string): string {
  const { code, message } = error as { code?: unknown, message: string }
  const quoted = /'([^']*)'/.exec(message)?.[1]?.replace(/ <value>$/, '')
  if (quoted !== undefined) {
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option ${JSON.stringify(quoted)} for "${command}"`
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') return `unexpected argument ${JSON.stringify(quoted)} for "${command}"`
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      return /does not take an argument/.test(message)
        ? `${quoted} takes no value`
        : `${quoted} needs a value; write ${quoted}=VALUE for one that starts with "-"`
    }
  }
  return message.split('\n')[0] ?? message
}
