import type { Config } from '../config.js'
import { counted } from '../counted.js'
import { resealPlan } from '../webhooks/reseal.js'
import { SecretBox } from '../webhooks/secrets.js'
import { defineCommand, type CommandGroup } from './command.js'
import { withCommandStore } from './command-store.js'
import { ENVIRONMENT } from './usage.js'

/** `plantstore webhooks reseal`: the stored webhook signing secrets sealed with the current key. */

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

export const WEBHOOKS: CommandGroup = { name: 'webhooks', usage: WEBHOOKS_USAGE }

const MEMORY_REFUSAL = 'the signing secrets of a memory store live only inside the running service, sealed with its key'

/**
 * Every stored signing secret sealed with WEBHOOK_SECRETS_KEY, in one transaction; one line printed.
 * Going back to no key is not supported.
 */
export const webhooksReseal = defineCommand<{ readonly command: 'webhooks reseal' }>({
  name: 'webhooks reseal',
  group: WEBHOOKS,
  summary: 'seal the stored webhook signing secrets with WEBHOOK_SECRETS_KEY',
  usage: RESEAL_USAGE,
  parse ({ options }) {
    const parsed = options({}, false)
    return parsed.command === 'help' ? parsed : { command: 'webhooks reseal' }
  },
  run: (_invocation, config) => reseal(config)
})

async function reseal (config: Config): Promise<number> {
  const { secretsKey, previousSecretsKeys } = config.webhooks
  if (secretsKey === undefined) {
    throw new Error('WEBHOOK_SECRETS_KEY is not set: webhooks reseal seals the stored signing secrets with it ' +
      '(with WEBHOOK_SECRETS_PREVIOUS_KEYS naming the keys that sealed them); storing them unsealed again is not supported')
  }
  const line = await withCommandStore(config, MEMORY_REFUSAL, async (store) => {
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
