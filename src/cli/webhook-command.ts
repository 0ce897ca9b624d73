import type { Config } from '../config.js'
import { counted } from '../counted.js'
import { resealPlan } from '../webhooks/reseal.js'
import { SecretBox } from '../webhooks/secrets.js'
import { withCommandStore } from './command-store.js'
import { isHelp, parseOptions, UsageError, type HelpInvocation } from './options.js'
import { ENVIRONMENT } from './usage.js'

/** A `plantstore webhooks …` command, checked. */
export interface WebhookInvocation { readonly command: 'webhooks reseal' }

export function isWebhookInvocation (invocation: { readonly command: string }): invocation is WebhookInvocation {
  return invocation.command.startsWith('webhooks ')
}

export const WEBHOOKS_USAGE = `Usage: plantstore webhooks <command> [options]

Commands:
  reseal          seal every stored signing secret with WEBHOOK_SECRETS_KEY

Options:
  -h, --help      show this help; "plantstore webhooks <command> --help" shows a command's own

${ENVIRONMENT}`

export const RESEAL_USAGE = `Usage: plantstore webhooks reseal

Seals again with WEBHOOK_SECRETS_KEY every webhook signing secret that a key of
WEBHOOK_SECRETS_PREVIOUS_KEYS sealed, or that was stored before WEBHOOK_SECRETS_KEY was set, in one
transaction, and drops the previous secrets of rotations whose grace period is over. Run it once every
instance runs with the new WEBHOOK_SECRETS_KEY; then WEBHOOK_SECRETS_PREVIOUS_KEYS can be removed.
Running it again changes nothing. If a secret opens with none of the keys, nothing is changed.

Options:
  -h, --help     show this help

${ENVIRONMENT}
Exit codes:
  0  every stored secret is sealed with WEBHOOK_SECRETS_KEY
  1  WEBHOOK_SECRETS_KEY is not set, a secret opens with none of the keys, the database is unavailable
     or cannot be opened, the configuration is invalid, or DATABASE_URL is "memory:"
  2  usage error: unknown command or option
`

/** Reads the arguments after `plantstore webhooks`; throws UsageError. */
export function parseWebhooksCommand (args: readonly string[]): WebhookInvocation | HelpInvocation {
  const [subcommand, ...rest] = args
  if (subcommand === undefined) throw new UsageError('webhooks needs a command: reseal', 'plantstore webhooks')
  if (isHelp(subcommand)) return { command: 'help', text: WEBHOOKS_USAGE }
  if (subcommand !== 'reseal') {
    throw new UsageError(`unknown command ${JSON.stringify(`webhooks ${subcommand}`)}; the webhooks command is reseal`, 'plantstore webhooks')
  }
  const parsed = parseOptions(rest, 'webhooks reseal', RESEAL_USAGE, {}, false)
  return parsed.command === 'help' ? parsed : { command: 'webhooks reseal' }
}

/**
 * `plantstore webhooks reseal`: every stored signing secret sealed with WEBHOOK_SECRETS_KEY, in one
 * transaction; prints one line and resolves with the exit code. Going back to no key is not supported.
 */
export async function runWebhookCommand (_invocation: WebhookInvocation, config: Config): Promise<number> {
  const { secretsKey, previousSecretsKeys } = config.webhooks
  if (secretsKey === undefined) {
    throw new Error('WEBHOOK_SECRETS_KEY is not set: webhooks reseal seals the stored signing secrets with it ' +
      '(with WEBHOOK_SECRETS_PREVIOUS_KEYS naming the keys that sealed them); storing them unsealed again is not supported')
  }
  const memoryRefusal = 'the signing secrets of a memory store live only inside the running service, sealed with its key'
  const line = await withCommandStore(config, memoryRefusal, async (store) => {
    const plan = resealPlan(await store.webhooks.storedSecrets(), new SecretBox(secretsKey, previousSecretsKeys), Date.now())
    const replaced = await store.webhooks.replaceStoredSecrets(plan.replacements)
    const sealed = plan.underPreviousKeys + plan.unsealed
    const changedMeanwhile = plan.replacements.length - replaced
    return `sealed ${counted(sealed, 'webhook signing secret')} with WEBHOOK_SECRETS_KEY ` +
      `(${plan.underPreviousKeys} sealed with a previous key, ${plan.unsealed} stored unsealed), ` +
      `${plan.current} already were; dropped ${counted(plan.expired, 'expired previous secret')}` +
      (changedMeanwhile === 0 ? '' : `; ${counted(changedMeanwhile, 'secret')} changed meanwhile and were left as they are: run it again`) +
      '\n'
  })
  process.stdout.write(line)
  return 0
}
