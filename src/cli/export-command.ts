import type { Config } from '../config.js'
import type { DataInvocation } from './data-command-line.js'

export async function runExport (_invocation: Extract<DataInvocation, { command: 'export' }>, _config: Config): Promise<number> {
  throw new Error('export is not built yet')
}
