import { execFileSync } from 'node:child_process'

/** The process tests run the real built server, so build it once per run. */
export default function setup (): void {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' })
}
