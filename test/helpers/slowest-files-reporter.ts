import { relative } from 'node:path'
import type { Reporter, TestModule } from 'vitest/node'

const SHOWN = 10

/** Prints the test files that took longest, so a suite that grows slow shows where. */
export default class SlowestFilesReporter implements Reporter {
  onTestRunEnd (testModules: ReadonlyArray<TestModule>): void {
    const slowest = testModules
      .map((testModule) => ({ file: relative(process.cwd(), testModule.moduleId), seconds: testModule.diagnostic().duration / 1000 }))
      .sort((a, b) => b.seconds - a.seconds)
      .slice(0, SHOWN)
    if (slowest.length === 0) return
    const lines = slowest.map(({ file, seconds }) => `${seconds.toFixed(1).padStart(7)} s  ${file}`)
    process.stdout.write(`\nSlowest test files (${slowest.length} of ${testModules.length}):\n${lines.join('\n')}\n`)
  }
}
