import { setTimeout as sleep } from 'node:timers/promises'
import type { ServerProcess } from './server-process.js'

/** The built server's JSON log lines about the identity provider's keys: level and message. */
export function keySetLines (server: Pick<ServerProcess, 'stdout'>): Array<{ level: number, msg: string }> {
  return server.stdout().split('\n')
    .filter((line) => line.includes('identity provider\'s keys'))
    .map((line) => {
      const { level, msg } = JSON.parse(line) as { level: number, msg: string }
      return { level, msg }
    })
}

/** Standard output is written in batches: waits (at most 3 s) until `count` key-set lines are there. */
export async function untilKeySetLines (server: Pick<ServerProcess, 'stdout'>, count: number): Promise<void> {
  const deadline = Date.now() + 3000
  while (keySetLines(server).length < count && Date.now() < deadline) await sleep(20)
}
