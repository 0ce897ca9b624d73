import { backup } from './backup.js'
import { type Command, type CommandGroup, type Invocation } from './command.js'
import { copy } from './copy.js'
import { exportCommand } from './export.js'
import { importCommand } from './import.js'
import { isHelp, UsageError, type HelpInvocation } from './options.js'
import { restore } from './restore.js'
import { tokensCreate, tokensList, tokensRevoke } from './tokens.js'
import { ENVIRONMENT, EXIT_CODES } from './usage.js'
import { webhooksReseal } from './webhooks.js'

/** Every command of `plantstore`, in the order its help lists them. */
export const COMMANDS: readonly Command[] = [
  tokensCreate, tokensList, tokensRevoke, backup, restore, exportCommand, importCommand, copy, webhooksReseal
]

export const MAIN_USAGE = `Usage: plantstore <command> [options]

Works on a plantstore database directly, for operators who can reach the database: its access tokens
(a change is read by the running services before the command returns, without a restart), its backups,
and its data.

Commands:
${COMMANDS.map((command) => `  ${command.synopsis.padEnd(15)} ${command.summary}`).join('\n')}

Options:
  -h, --help      show this help; "plantstore <command> --help" shows a command's own

${ENVIRONMENT}
${EXIT_CODES}`

const COMMAND_LIST = `the commands are ${COMMANDS.map((command) => command.name).join(', ')}`

/** Reads `plantstore …`'s arguments (without the node and script paths); throws UsageError. */
export function parseCommandLine (args: readonly string[], now = Date.now()): Invocation | HelpInvocation {
  const [word, ...rest] = args
  if (word === undefined) throw new UsageError(`no command given; ${COMMAND_LIST}`)
  if (isHelp(word)) return { command: 'help', text: MAIN_USAGE }
  if (word.startsWith('-')) throw new UsageError(`unknown option ${JSON.stringify(word)}`)
  const command = COMMANDS.find((candidate) => candidate.group === undefined && candidate.name === word)
  if (command !== undefined) return command.parse(rest, now)
  const group = COMMANDS.find((candidate) => candidate.group?.name === word)?.group
  if (group !== undefined) return parseGroupCommand(group, rest, now)
  throw new UsageError(`unknown command ${JSON.stringify(word)}; ${COMMAND_LIST}`)
}

/** The command that `parseCommandLine` read this invocation for. */
export function commandOf (invocation: Invocation): Command {
  const command = COMMANDS.find((candidate) => candidate.name === invocation.command)
  if (command === undefined) throw new Error(`no command ${JSON.stringify(invocation.command)}`)
  return command
}

/** Reads the arguments after `plantstore <group>`. */
function parseGroupCommand (group: CommandGroup, args: readonly string[], now: number): Invocation | HelpInvocation {
  const members = COMMANDS.filter((command) => command.group === group)
  const words = members.map((command) => command.name.slice(group.name.length + 1))
  const helpCommand = `plantstore ${group.name}`
  const [word, ...rest] = args
  if (word === undefined) throw new UsageError(`${group.name} needs a command: ${listed(words, 'or')}`, helpCommand)
  if (isHelp(word)) return { command: 'help', text: group.usage }
  if (word.startsWith('-')) throw new UsageError(`unknown option ${JSON.stringify(word)} for "${group.name}"`, helpCommand)
  const command = members.find((candidate) => candidate.name === `${group.name} ${word}`)
  if (command !== undefined) return command.parse(rest, now)
  const known = words.length === 1 ? `the ${group.name} command is ${words[0]}` : `the ${group.name} commands are ${listed(words, 'and')}`
  throw new UsageError(`unknown command ${JSON.stringify(`${group.name} ${word}`)}; ${known}`, helpCommand)
}

/** `create, list or revoke`. */
function listed (words: readonly string[], conjunction: 'and' | 'or'): string {
  return words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} ${conjunction} ${words.at(-1) ?? ''}`
}
