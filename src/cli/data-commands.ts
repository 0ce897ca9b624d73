import type { Config } from '../config.js'
import type { DataInvocation } from './data-command-line.js'

/**
 * Runs a command that moves a store's data and resolves with its exit code. Each command's module is
 * loaded only when it runs.
 */
export async function runDataCommand (invocation: DataInvocation, config: Config): Promise<number> {
  switch (invocation.command) {
    case 'backup': return (await import('./backup-command.js')).runBackup(invocation, config)
    case 'restore': return (await import('./restore-command.js')).runRestore(invocation, config)
    case 'export': return (await import('./export-command.js')).runExport(invocation, config)
    case 'import': return (await import('./import-command.js')).runImport(invocation, config)
    case 'copy': return (await import('./copy-command.js')).runCopy(invocation, config)
  }
}
