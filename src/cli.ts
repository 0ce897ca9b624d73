#!/usr/bin/env -S node --max-semi-space-size=8 --heap-growing-percent=50
import { AccessTokenRegistry } from './auth/token-registry.js'
import { parseCommandLine, UsageError, type Invocation } from './cli/command-line.js'
import { runDataCommand } from './cli/data-commands.js'
import { withCommandStore } from './cli/command-store.js'
import { isTokenInvocation } from './cli/token-command-line.js'
import { isWebhookInvocation, runWebhookCommand } from './cli/webhook-command.js'
import { runTokenCommand } from './cli/token-commands.js'
import { InvalidConfigError, loadConfig, loadDotEnvFile } from './config.js'
import { StoreUnavailableError } from './store/plant-store.js'

/**
 * Entry point of the `plantstore` command: reads the configuration as the service does and opens the
 * same store. `tokens create|list|revoke` change its tokens through the service's registry; backup,
 * restore, export, import and copy move its data (cli/data-commands.ts). Exit codes: 0 success, 1 the
 * operation failed, 2 usage error. Each error is one line on stderr, never holding a token.
 */
async function main (args: readonly string[]): Promise<number> {
  let invocation: Invocation
  try {
    invocation = parseCommandLine(args)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    reportError(error.message)
    return 2
  }
  if (invocation.command === 'help') {
    process.stdout.write(invocation.text)
    return 0
  }
  try {
    loadDotEnvFile()
    const config = loadConfig()
    if (isWebhookInvocation(invocation)) return await runWebhookCommand(invocation, config)
    if (!isTokenInvocation(invocation)) return await runDataCommand(invocation, config)
    const memoryRefusal = 'the tokens of a memory store live only inside the running service; ' +
      'manage them there with POST /admin/tokens, GET /admin/tokens and DELETE /admin/tokens/{id}'
    const output = await withCommandStore(config, memoryRefusal, async (store) => {
      const registry = new AccessTokenRegistry(store.tokens, config.tokens)
      await registry.refresh()
      return runTokenCommand(invocation, registry)
    })
    process.stdout.write(output)
    return 0
  } catch (error) {
    reportError(reasonOf(error))
    return 1
  }
}

function reasonOf (error: unknown): string {
  if (error instanceof InvalidConfigError) return `configuration error: ${error.errors.map((problem) => problem.message).join('; ')}`
  if (error instanceof StoreUnavailableError) return `the database is unavailable: ${error.message}`
  // CommandFailure, StoreOpenError and the rest: their message names the problem.
  if (error instanceof Error) return error.message
  return String(error)
}

function reportError (message: string): void {
  process.stderr.write(`plantstore: ${message.replace(/\s*\n\s*/g, ' ')}\n`)
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code },
  (error: unknown) => {
    reportError(reasonOf(error))
    process.exitCode = 1
  })
