import { followChanges } from './follow.js'
import type { Transport } from './transport.js'
import type { CallOptions, Change, FollowOptions } from './types.js'

/** The changes feed: every committed change of every plant, in commit order. */
export class Changes {
  constructor (private readonly transport: Transport) {}

  /** The greatest `seq` ever committed; 0 before the first change. */
  async head (options: CallOptions = {}): Promise<bigint> {
    const answer = await this.transport.send({ method: 'GET', path: '/plants/changes/head', repeatable: true, signal: options.signal })
    const { seq } = answer.body as { seq?: unknown }
    if (typeof seq === 'bigint') return seq
    if (typeof seq === 'number' && Number.isSafeInteger(seq)) return BigInt(seq)
    throw new TypeError('the service answered a head without an integer seq')
  }

  /**
   * Every change after `after` (by default, from now on), as it is committed, each once and in order,
   * for as long as the iteration goes on: the stream is opened again whenever it breaks. Aborting
   * `signal`, or leaving the loop, ends it.
   */
  follow (options: FollowOptions = {}): AsyncGenerator<Change, void, undefined> {
    return followChanges(this.transport, options, () => this.head({ signal: options.signal }))
  }
}
