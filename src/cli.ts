#!/usr/bin/env -S node --max-semi-space-size=8 --heap-growing-percent=50
import { isHelpInvocation, type Invocation } from './cli/command.js'
import { commandOf, parseCommandLine } from './cli/commands.js'
import { UsageError, type HelpInvocation } from './cli/options.js'
import { InvalidConfigError, loadConfig, loadDotEnvFile } from './config.js'
import { StoreUnavailableError } from './store/plant-store.js'

/**
 * Entry point of the `plantstore` command: reads the table of commands (cli/commands.ts), then the
 * configuration as the service does, and runs the command. Exit codes: 0 success, 1 the operation
 * failed, 2 usage error. Each error is one line on stderr, never holding a token.
 */
async function main (args: readonly string[]): Promise<number> {
  let invocation: Invocation | HelpInvocation
  try {
    invocation = parseCommandLine(args)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    reportError(error.message)
    return 2
  }
  if (isHelpInvocation(invocation)) {
    process.stdout.write(invocation.text)
    return 0
  }
  try {
    loadDotEnvFile()
    return await commandOf(invocation).run(invocation, loadConfig())
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
