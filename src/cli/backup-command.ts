import type { Config } from '../config.js'
import type { DataInvocation } from './data-command-line.js'

export async function runBackup (_invocation: Extract<DataInvocation, { command: 'backup' }>, _config: Config): Promise<number> {
  throw new Error('backup is not built yet')
}
