import type { Config } from '../config.js'
import type { DataInvocation } from './data-command-line.js'

export async function runCopy (_invocation: Extract<DataInvocation, { command: 'copy' }>, _config: Config): Promise<number> {
  throw new Error('copy is not built yet')
}
