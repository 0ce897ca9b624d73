import type { Config } from '../config.js'
import type { DataInvocation } from './data-command-line.js'

export async function runRestore (_invocation: Extract<DataInvocation, { command: 'restore' }>, _config: Config): Promise<number> {
  throw new Error('restore is not built yet')
}
