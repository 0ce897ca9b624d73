import { DATA_COMMANDS, isDataCommand, parseDataCommand, type DataInvocation } from './data-command-line.js'
import { isHelp, UsageError, type HelpInvocation } from './options.js'
import { parseTokensCommand, type TokenInvocation } from './token-command-line.js'
import { parseWebhooksCommand, type WebhookInvocation } from './webhook-command.js'
import { MAIN_USAGE } from './usage.js'

export { UsageError } from './options.js'

/** What the command line asks for, checked: nothing here has touched the configuration or the store. */
export type Invocation = HelpInvocation | TokenInvocation | DataInvocation | WebhookInvocation

const COMMANDS = `the commands are tokens create, tokens list, tokens revoke, ${DATA_COMMANDS.join(', ')}, webhooks reseal`

/** Reads `plantstore …`'s arguments (without the node and script paths); throws UsageError. */
export function parseCommandLine (args: readonly string[], now = Date.now()): Invocation {
  const [command, ...rest] = args
  if (command === undefined) throw new UsageError(`no command given; ${COMMANDS}`)
  if (isHelp(command)) return { command: 'help', text: MAIN_USAGE }
  if (command.startsWith('-')) throw new UsageError(`unknown option ${JSON.stringify(command)}`)
  if (command === 'tokens') return parseTokensCommand(rest, now)
  if (command === 'webhooks') return parseWebhooksCommand(rest)
  if (isDataCommand(command)) return parseDataCommand(command, rest)
  throw new UsageError(`unknown command ${JSON.stringify(command)}; ${COMMANDS}`)
}
