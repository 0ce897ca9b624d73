import type { Config } from '../config.js'
import type { DataInvocation } from './data-command-line.js'

export async function runImport (_invocation: Extract<DataInvocation, { command: 'import' }>, _config: Config): Promise<number> {
  throw new Error('import is not built yet')
}
