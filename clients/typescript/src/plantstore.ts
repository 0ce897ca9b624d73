import { Changes } from './changes.js'
import { Plants } from './plants.js'
import { Transport, type TransportOptions } from './transport.js'

export type PlantstoreOptions = TransportOptions

/**
 * A client of one plantstore service. Every int64 stays exact both ways: results carry bigints, and ids
 * may be given as bigints, safe-integer numbers or decimal text.
 *
 * ```ts
 * const ps = new Plantstore({ baseUrl: 'http://127.0.0.1:3000', token: process.env.PLANTSTORE_TOKEN })
 * const { plant, etag } = await ps.plants.create({ id: 9007199254740993n, name: 'Fern' })
 * ```
 */
export class Plantstore {
  readonly plants: Plants
  readonly changes: Changes

  constructor (options: PlantstoreOptions) {
    const transport = new Transport(options)
    this.plants = new Plants(transport)
    this.changes = new Changes(transport)
  }
}
